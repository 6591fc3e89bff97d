"""Cost of long kernel names (issue 29 item 5): a trace whose 30 kernels carry distinct names just under the
1 MiB string limit, each launched once in one step. `tracekit info` (load and inventory: the communication rules
on every distinct name) against `tracekit analyze` (the kernel classes, short names, breakdowns on top), each a
fresh process, minimum wall time over the repeats; the figure is the ratio analyze / info.

    python benchmarks/long_names.py                 # 30 names of ~1 MiB, 3 repeats
    python benchmarks/long_names.py --names 30 --bytes 1000000 --repeats 5 --out results.json

Names mix what real demangled names hold (nested template arguments, parameter lists) so that every rule and the
short-name parser see their worst case, not a run of one letter.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def long_name(i: int, size: int) -> str:
    head = f"void ns{i}::kernel_{i}<"
    unit = f"at::native::Functor<float, {i}>, c10::BFloat16, (anonymous namespace)::lambda()#{i}, "
    body = unit * max(1, (size - len(head) - 64) // len(unit))
    return (head + body)[: size - 40] + f"int>(float*, int, long{i})"


def write_trace(path: str, names: int, size: int) -> None:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10_000}]
    for i in range(names):
        corr = 100 + i
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 + i * 100,
             "dur": 5, "args": {"correlation": corr}}
        )  # fmt: skip
        events.append(
            {"ph": "X", "cat": "kernel", "name": long_name(i, size), "pid": 0, "tid": 7, "ts": 20 + i * 100, "dur": 50,
             "args": {"correlation": corr, "stream": 7, "device": 0}}
        )  # fmt: skip
    with open(path, "w") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}]}, f)


def timed(cmd: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        best = min(best, time.perf_counter() - t)
        if res.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {res.returncode}: {res.stderr[-400:]}")
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--names", type=int, default=30)
    ap.add_argument("--bytes", type=int, default=1024**2 - 1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "long-names.json")
        write_trace(trace, a.names, a.bytes)
        tk = [sys.executable, "-m", "tracekit"]
        info_s = timed([*tk, "info", trace, "--no-cache"], a.repeats)
        analyze_s = timed([*tk, "analyze", trace, "--no-cache", "--format", "json"], a.repeats)
        table_s = timed([*tk, "analyze", trace, "--no-cache"], a.repeats)
    result = {
        "names": a.names,
        "name_bytes": a.bytes,
        "trace_mb": round(a.names * a.bytes / 1e6, 1),
        "info_s": round(info_s, 3),
        "analyze_json_s": round(analyze_s, 3),
        "analyze_table_s": round(table_s, 3),
        "analyze_json_over_info": round(analyze_s / info_s, 2),
        "analyze_table_over_info": round(table_s / info_s, 2),
    }
    print(json.dumps(result, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
