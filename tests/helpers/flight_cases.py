"""Hangs made for real on gloo, with the injected rank as the known answer, dumped by tracekit's own collector.

Every rank all-reduces on a 3-rank group ``mesh_dp`` (a DeviceMesh-style name: dimension dp) with a 2 s timeout,
one collective per step, under ``tracekit.profile(ranks=[], flight_recorder=True)`` (no profiler: the ring alone).
The block ends normally or by the collective's timeout error; either way the ring is dumped (pickle, and the JSON
form into ``json/``, the pickle with stack frames into ``stacks/``). Cases:

- ``ok``: nobody misbehaves (every group consistent);
- ``skip``: rank 2 skips the all-reduce of step 2 (its later ones pair with its peers' earlier ones);
- ``sleep``: rank 1 sleeps 3 s, past the timeout, before step 2's all-reduce;
- ``size``: rank 2 all-reduces 12 elements instead of 8 at step 2.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from pathlib import Path

INJECTED = {"ok": (), "skip": (2,), "sleep": (1,), "size": (2,)}
WORLD = 3
STEPS = 4
TIMEOUT_S = 2.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hang_case(rank: int, world: int, port: int, out_dir: str, queue, case: str) -> None:
    import torch
    import torch.distributed as dist

    import tracekit
    from tracekit.collectors import flight_recorder

    torch.set_num_threads(1)
    flight_recorder.enable()
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=timedelta(seconds=120)
    )
    group = dist.new_group(list(range(world)), timeout=timedelta(seconds=TIMEOUT_S), group_desc="mesh_dp")
    result: dict = {"rank": rank, "error": None, "steps": 0}
    try:
        with tracekit.profile(out_dir, ranks=[], flight_recorder=True) as p:
            for step in range(STEPS):
                x = torch.ones(12 if case == "size" and rank == 2 and step == 2 else 8)
                if case == "sleep" and rank == 1 and step == 2:
                    time.sleep(TIMEOUT_S + 1.0)
                if not (case == "skip" and rank == 2 and step == 2):
                    dist.all_reduce(x, group=group)
                result["steps"] += 1
    except RuntimeError as exc:  # the collective timed out, or a peer left: the training loop sees the failure
        result["error"] = str(exc).splitlines()[0][:200]
    flight_recorder.dump(Path(out_dir) / "json", rank, form="json")
    flight_recorder.dump(Path(out_dir) / "stacks", rank, stacks=True)  # with the Python frames of each entry
    result["problems"] = list(p.problems)
    result["dump"] = str(p.flight_dump)
    queue.put(result)
    os._exit(0)  # no teardown of a process group whose peers are gone


def record(case: str, out_dir: Path) -> list[dict]:
    """Run ``case`` on WORLD spawned ranks; each rank's dump lands in ``out_dir``. Returns the ranks' results."""
    import torch.multiprocessing as mp

    queue = mp.get_context("spawn").SimpleQueue()
    ctx = mp.start_processes(
        hang_case, args=(WORLD, _free_port(), str(out_dir), queue, case), nprocs=WORLD, start_method="spawn", join=False
    )
    results: list[dict] = []
    deadline = time.monotonic() + 240
    while len(results) < WORLD and time.monotonic() < deadline:
        if not queue.empty():
            results.append(queue.get())
        else:
            time.sleep(0.05)
    ctx.join(timeout=30)
    return sorted(results, key=lambda r: r["rank"])


if __name__ == "__main__":  # python -m tests.helpers.flight_cases OUT: record every case under OUT/<case>
    import sys

    for name in INJECTED:
        where = Path(sys.argv[1]) / name
        print(name, record(name, where))
