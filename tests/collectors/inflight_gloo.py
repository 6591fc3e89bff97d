"""A gloo collective left in flight across ``p.step()`` under ``tracekit.profile`` (FSDP-style prefetch of the
next step's all-gather), as a standalone script: ``python -m tests.collectors.inflight_gloo OUT [--tries N]
[--release]`` runs 2 ranks N times, each in its own process group of processes, and prints one JSON line per
try (exit codes, where each rank got to) and a summary.

torch 2.13 CPU: a rank may abort *after* its last line of Python (SIGABRT, or SIGSEGV when faulthandler's own
handler faults): a gloo worker thread destroys a Work object while the interpreter finalizes, takes the GIL and
is terminated (pytorch/pytorch#190489). It needs a Work in flight across one of the profiler's state changes
(warm-up start, recording start, stop/export) and the Work handle still alive when the process group is
destroyed. ``--release`` drops the handles (and collects) before ``destroy_process_group()``, the workaround
documented in docs/collectors.md.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import os
import socket
import subprocess
import sys

MB = 16  # per all-gather input; 4 of them in flight per step
N_OPS = 4
STEPS = 6


def rank_main(rank: int, port: int, out: str, release: bool, mb: int = MB) -> None:
    faulthandler.enable()
    import torch
    import torch.distributed as dist

    import tracekit

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    x = torch.randn(mb * 250_000)
    outs = [torch.empty_like(x) for _ in range(2)]
    w = torch.randn(64, 64, requires_grad=True)
    works: list = []
    # repeat=0: the schedule cycles, so the loop crosses warm-up start, recording start and stop/export twice
    with tracekit.profile(out, wait=1, warmup=1, active=2, repeat=0) as p:
        for _ in range(STEPS):
            for work in works:  # the previous step's prefetch, waited under this step's compute
                work.wait()
            (torch.randn(32, 64) @ w).sum().backward()
            works = [dist.all_gather(outs, x, async_op=True) for _ in range(N_OPS)]  # the next step's gather
            p.step()
        for work in works:
            work.wait()
    dist.barrier()
    print(
        json.dumps({"rank": rank, "steps": STEPS, "traces": [str(t) for t in p.trace_paths], "problems": p.problems}), flush=True
    )
    if release:
        del works, work
        gc.collect()
    dist.destroy_process_group()


def one_try(out: str, release: bool, timeout: float = 300, mb: int = MB) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    cmd = [sys.executable, "-m", "tests.collectors.inflight_gloo", "--rank", "{r}", "--port", str(port), "--mb", str(mb), out]
    if release:
        cmd.append("--release")
    procs = [
        subprocess.Popen([c.format(r=r) for c in cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(2)
    ]
    results = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        results.append({"rc": proc.returncode, "finished": lines[0] if lines else None, "stderr_tail": stderr[-600:]})
    return {"exit_codes": [r["rc"] for r in results], "ranks": results}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tries", type=int, default=1)
    ap.add_argument("--release", action="store_true")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--port", type=int)
    ap.add_argument("--mb", type=int, default=MB, help="MB per all-gather input")
    args = ap.parse_args(argv)
    if args.rank is not None:
        rank_main(args.rank, args.port, args.out, args.release, args.mb)
        return 0
    crashed = 0
    for i in range(args.tries):
        res = one_try(os.path.join(args.out, f"try{i}"), args.release, mb=args.mb)
        crashed += any(rc != 0 for rc in res["exit_codes"])
        print(
            json.dumps(
                {"try": i, "exit_codes": res["exit_codes"], "finished": [r["finished"] is not None for r in res["ranks"]]}
            ),
            flush=True,
        )
    print(json.dumps({"tries": args.tries, "crashed": crashed, "release": args.release}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
