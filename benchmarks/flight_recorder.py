"""Flight Recorder: what a dump costs the run, and reading and analysing many ranks' dumps, side by side with
PyTorch's own analyzer (torchfrtrace: ``pickle.load`` of each dump, then ``build_db``).

    .venv/bin/python benchmarks/flight_recorder.py dump --collectives 2500      # 2 gloo ranks: the dump's cost
    .venv/bin/python benchmarks/flight_recorder.py read --ranks 64 --entries 2000 [--out results.json]

``dump``: two spawned gloo ranks issue N all-reduces (torch's default ring keeps the last 2000), then each times
``_dump_fr_trace`` without and with stack frames and ``_dump_fr_trace_json``. ``read``: the real gloo-skip dumps
of tests/data/flight-recorder, their ring stretched to ``--entries`` collectives and copied to ``--ranks`` ranks
(pg_config filled in, so torchfrtrace runs too); times ``tracekit hang``'s read + analysis, the timing analysis,
and torchfrtrace's ``read_dir`` + ``build_db`` on the same files, each tool in a process of its own (peak RSS).
Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REAL = Path(__file__).resolve().parents[1] / "tests" / "data" / "flight-recorder" / "gloo-skip"


def _dump_rank(rank: int, port: int, n: int, queue) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch._C import _distributed_c10d as c10d

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=timedelta(seconds=120)
    )
    x = torch.ones(1)
    for _ in range(n):
        dist.all_reduce(x)
    out = {"rank": rank}
    for name, call in (
        ("pickle_no_stacks", lambda: c10d._dump_fr_trace(includeStackTraces=False)),
        ("pickle_stacks", lambda: c10d._dump_fr_trace()),
        ("json", lambda: c10d._dump_fr_trace_json()),
    ):
        t0 = time.perf_counter()
        data = call()
        out[name] = {
            "s": time.perf_counter() - t0,
            "bytes": len(data),
            "entries": len(pickle.loads(data)["entries"]) if "pickle" in name else None,
        }
    queue.put(out)
    dist.destroy_process_group()


def bench_dump(n: int) -> list[dict]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_dump_rank, args=(port, n, queue), nprocs=2, start_method="spawn")
    return [queue.get() for _ in range(2)]


def _stretch(d: dict, entries: int, rank: int) -> dict:
    """The real dump's mesh_dp ring repeated to ``entries`` collectives, numbered on, times moved on by its spacing."""
    mesh = [e for e in d["entries"] if e["process_group"][1] == "mesh_dp"]
    step = mesh[-1]["time_created_ns"] - mesh[0]["time_created_ns"] + 1_000_000
    out = []
    for i in range(entries):
        e = dict(mesh[i % len(mesh)])
        e.update(
            record_id=i, collective_seq_id=i + 1, op_id=i + 1, time_created_ns=e["time_created_ns"] + (i // len(mesh)) * step
        )
        out.append(e)
    return {**d, "entries": out}


def write_run(folder: Path, ranks: int, entries: int) -> None:
    base = pickle.loads((REAL / "_dump_0").read_bytes())
    config = {"1": {"name": "1", "desc": "mesh_dp", "ranks": str(list(range(ranks)))}}
    stretched = _stretch(base, entries, 0)
    stretched["pg_config"] = config
    data = pickle.dumps(stretched)
    for r in range(ranks):
        (folder / f"_dump_{r}").write_bytes(data)


def _stages(tool: str, folder: str) -> dict:
    """One tool's stages on ``folder``, in this process: seconds each, and the process's peak RSS."""
    import resource

    times = {}
    if tool == "tracekit":
        from tracekit.analyzers.flight.hang import analyze_hang
        from tracekit.analyzers.flight.timing import analyze_timing
        from tracekit.loader.flight import read_flight_dir

        t0 = time.perf_counter()
        run = read_flight_dir(folder)
        times["read"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        analyze_hang(run)
        times["hang"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        analyze_timing(run)
        times["timing"] = time.perf_counter() - t0
    else:
        from torch.distributed.flight_recorder.components.builder import build_db
        from torch.distributed.flight_recorder.components.config_manager import JobConfig
        from torch.distributed.flight_recorder.components.loader import read_dir

        args = JobConfig().parse_args([folder, "--prefix", "_dump_"])
        t0 = time.perf_counter()
        details, version = read_dir(args)
        times["read_dir"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        build_db(details, args, version)
        times["build_db"] = time.perf_counter() - t0
    return {"tool": tool, "s": times, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def bench_read(ranks: int, entries: int) -> list[dict]:
    """Both tools on the same files, each in a process of its own (its own peak memory)."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        write_run(Path(tmp), ranks, entries)
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        for tool in ("tracekit", "torchfrtrace"):
            res = subprocess.run([sys.executable, __file__, "_stages", tool, tmp], capture_output=True, text=True, timeout=3600)
            line = [x for x in res.stdout.splitlines() if x.startswith("{")]
            out.append(json.loads(line[-1]) if line else {"tool": tool, "failed": res.stderr[-500:]})
    tk, tf = out[0].get("s", {}), out[1].get("s", {})
    if tk and tf:
        out.append(
            {
                "ratio": "torchfrtrace (read_dir + build_db) / tracekit (read + hang)",
                "x": (tf["read_dir"] + tf["build_db"]) / (tk["read"] + tk["hang"]),
            }
        )
    for o in out:
        o.update(ranks=ranks, entries=entries, bytes=size)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    if len(sys.argv) == 4 and sys.argv[1] == "_stages":  # one tool, in a process of its own
        print(json.dumps(_stages(sys.argv[2], sys.argv[3])))
        return
    ap.add_argument("what", choices=["dump", "read"])
    ap.add_argument("--collectives", type=int, default=2500)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--out", default=None, help="append the records to this JSON-lines file")
    a = ap.parse_args()
    records = bench_dump(a.collectives) if a.what == "dump" else bench_read(a.ranks, a.entries)
    meta = {"host": platform.node(), "cpus": os.cpu_count(), "python": sys.version.split()[0], "load": os.getloadavg()[0]}
    for r in records:
        line = json.dumps({**r, **meta})
        print(line)
        if a.out:
            with open(a.out, "a") as fh:
                fh.write(line + "\n")


if __name__ == "__main__":
    main()
