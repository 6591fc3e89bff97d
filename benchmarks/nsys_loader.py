"""The Nsight Systems loader against the Kineto loader on the same events: events per second and peak memory.

Writes one export with the real schema (tests/helpers/nsys_export.py: the DDL of a real nsys 2026.1 export) of
N kernels on 4 streams, each with its ``cudaLaunchKernel`` call, plus an NVTX step range every 10,000 kernels,
and the same events as a Kineto trace (``cat: kernel`` / ``cuda_runtime`` / ``user_annotation``, the same names,
times, correlation ids). Each load is one fresh process (``--no-cache``: the file is read, not the Parquet cache)
timed from outside; peak memory is the child's ru_maxrss. Prints and writes one JSON document.

    PYTHONPATH=. .venv/bin/python benchmarks/nsys_loader.py --kernels 5000000 --out /tmp/nsys-bench
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import msgspec
import numpy as np

from tests.helpers.nsys_export import ExportWriter

LOAD = """
import sys, time
t = time.perf_counter()
from tracekit.loader.loading import LoadOptions, load
ts = load(sys.argv[1], options=LoadOptions(cache=False), executor=sys.argv[2])
n = sum(len(t) for _, t in ts)
print(n, time.perf_counter() - t)
"""
WRAP = """
import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)
out = p.stdout.read()
_, status, usage = os.wait4(p.pid, 0)
print(out.strip(), usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""
NAMES = [f"void at::native::kernel_{i}<float, {i}>(at::TensorIteratorBase&, float const*)" for i in range(300)]
STEP_EVERY = 10_000


def _events(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    launch = np.cumsum(rng.integers(2_000, 6_000, n)).astype(np.int64) + 1_000_000
    return {
        "launch": launch,
        "launch_end": launch + rng.integers(1_000, 3_000, n),
        "start": launch + rng.integers(5_000, 50_000, n),
        "dur": rng.integers(1_000, 20_000, n).astype(np.int64),
        "stream": rng.integers(7, 11, n).astype(np.int64),
        "name": rng.integers(0, len(NAMES), n).astype(np.int64),
        "corr": np.arange(1, n + 1, dtype=np.int64),
    }


def write_export(path: str, ev: dict[str, np.ndarray]) -> None:
    w = ExportWriter(path)
    pid = 4242
    g = w.add_process(pid, "python")
    w.add_gpu(0)
    ids = [w.string(nm) for nm in NAMES]
    rt = w.string("cudaLaunchKernel_v7000")
    n = len(ev["corr"])
    kernel_sql = (
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, "
        "demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, "
        "dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) "
        "VALUES (?, ?, 0, 1, ?, ?, ?, ?, ?, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, 0)"
    )
    start, end = ev["start"].tolist(), (ev["start"] + ev["dur"]).tolist()
    name = [ids[i] for i in ev["name"].tolist()]
    w.db.executemany(kernel_sql, zip(start, end, ev["stream"].tolist(), ev["corr"].tolist(), [g] * n, name, name))
    w.db.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) "
        "VALUES (?, ?, 0, ?, ?, ?, 0)",
        zip(ev["launch"].tolist(), ev["launch_end"].tolist(), [g | pid] * n, ev["corr"].tolist(), [rt] * n),
    )
    for s, (a, b) in enumerate(_steps(ev)):
        w.add_range(a, b, g | pid, f"ProfilerStep#{s}")
    w.close()


def _steps(ev) -> list[tuple[int, int]]:
    edges = list(range(0, len(ev["corr"]), STEP_EVERY))
    return [(int(ev["launch"][i]) - 500, int(ev["launch"][min(i + STEP_EVERY, len(ev["corr"])) - 1]) + 1_000) for i in edges]


def write_kineto(path: str, ev: dict[str, np.ndarray], base_ns: int = 1_700_000_000_000_000_000) -> None:
    """The same events as a Kineto trace (ts in µs relative to baseTimeNanoseconds, as Kineto writes them)."""
    enc = msgspec.json.Encoder()
    n, chunk = len(ev["corr"]), 200_000
    with open(path, "wb") as fh:
        fh.write(b'{"schemaVersion": 1, "baseTimeNanoseconds": %d, "distributedInfo": {"rank": 0, "world_size": 1},' % base_ns)
        fh.write(b'"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": [')
        first = True
        for a, b in _steps(ev):
            ev_step = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{_steps(ev).index((a, b))}", "pid": 4242}
            fh.write((b"" if first else b",") + enc.encode({**ev_step, "tid": 4242, "ts": a / 1e3, "dur": (b - a) / 1e3}))
            first = False
        for lo in range(0, n, chunk):
            sl = slice(lo, min(lo + chunk, n))
            rows = []
            for la, le, st, du, stream, nm, c in zip(
                ev["launch"][sl].tolist(),
                ev["launch_end"][sl].tolist(),
                ev["start"][sl].tolist(),
                ev["dur"][sl].tolist(),
                ev["stream"][sl].tolist(),
                ev["name"][sl].tolist(),
                ev["corr"][sl].tolist(),
            ):
                rows.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 4242,
                        "tid": 4242,
                        "ts": la / 1e3,
                        "dur": (le - la) / 1e3,
                        "args": {"correlation": c},
                    }
                )
                rows.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": NAMES[nm],
                        "pid": 0,
                        "tid": stream,
                        "ts": st / 1e3,
                        "dur": du / 1e3,
                        "args": {"correlation": c, "device": 0, "stream": stream},
                    }
                )
            fh.write(b"," + enc.encode(rows)[1:-1])
        fh.write(b"]}")


def measure(path: str, executor: str) -> dict:
    """One load in a fresh process, started by a small wrapper process (a child's peak RSS counts from its fork, so
    it must not fork from this process, which holds the generated events): wall time from outside, the load's
    peak RSS (wait4's rusage of that process; a split load's worker processes are not counted in it)."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WRAP, sys.executable, "-c", LOAD, path, executor], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(f"load of {path} failed: {out.stderr[-500:]}")
    n, inside, peak_kb = out.stdout.split()
    return {
        "events": int(n),
        "wall_s": round(wall, 2),
        "load_s": round(float(inside), 2),
        "events_per_s": round(int(n) / wall),
        "peak_gb": round(int(peak_kb) / 1e6, 3),
        "file_mb": round(os.path.getsize(path) / 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=5_000_000)
    ap.add_argument("--out", default="/tmp/nsys-bench")
    ap.add_argument("--results", default=None, help="write the JSON here (default: benchmarks/results-DATE-nsys.json)")
    args = ap.parse_args()
    for sub in ("nsys", "kineto"):  # apart: a run.json beside a trace would be read as its manifest
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    ev = _events(args.kernels)
    export, trace = os.path.join(args.out, "nsys", "rank0.sqlite"), os.path.join(args.out, "kineto", "rank0.json")
    t = time.perf_counter()
    write_export(export, ev)
    t_export = time.perf_counter() - t
    write_kineto(trace, ev)
    runs = {"nsys_sqlite": measure(export, "serial"), "kineto_json_serial": measure(trace, "serial")}
    runs["kineto_json_split"] = measure(trace, "process")
    doc = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
        "kernels": args.kernels,
        "write_export_s": round(t_export, 1),
        "runs": runs,
        "ratio_nsys_vs_kineto_serial_wall": round(runs["kineto_json_serial"]["wall_s"] / runs["nsys_sqlite"]["wall_s"], 2),
    }
    print(json.dumps(doc, indent=1))
    target = args.results or os.path.join(os.path.dirname(__file__), f"results-{doc['date']}-nsys.json")
    with open(target, "w") as fh:
        json.dump(doc, fh, indent=1)


if __name__ == "__main__":
    main()
