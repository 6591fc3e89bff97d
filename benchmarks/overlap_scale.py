"""Overlap analysis (``tracekit.analyze``) on 1 M .. 10 M events: a loaded real trace tiled in time.

Copies of the rank's EventTable are shifted by its span (and their step numbers and correlation ids offset),
so the analysis sees n events of a longer run. Prints seconds and seconds / (n log2 n) per size.

    python benchmarks/overlap_scale.py [--events 1e6,2e6,5e6,1e7] [--trace FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tracekit  # noqa: E402
from tracekit.loader.loading import LoadOptions, load  # noqa: E402
from tracekit.model.events import EventTable  # noqa: E402
from tracekit.model.traceset import TraceSet  # noqa: E402

SOURCE = os.path.join(ROOT, "tests", "data", "kineto-gpu", "allreduce-broadcast-2rank-rank0.json.gz")


def tiled(table: EventTable, n_events: int) -> EventTable:
    copies = max(1, math.ceil(n_events / len(table)))
    span = int(table.end_ns.max() - table["ts_ns"].min()) + 1000
    steps = table["step"][table["step"] >= 0]
    nsteps = int(steps.max() - steps.min() + 1) if len(steps) else 0
    ncorr = int(table["correlation"].max()) + 1
    k = np.repeat(np.arange(copies, dtype=np.int64), len(table))
    cols = {}
    for name, col in table.columns.items():
        rep = np.tile(col, copies)
        if name == "ts_ns":
            rep = rep + k * span
        elif name == "step":
            rep = np.where(rep >= 0, rep + k * nsteps, rep).astype(col.dtype)
        elif name in ("correlation", "seq"):
            rep = np.where(rep >= 0, rep + k * (ncorr if name == "correlation" else 10**6), rep)
        cols[name] = rep[:n_events].astype(col.dtype, copy=False)
    return EventTable(cols, table.strings)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", default="1e6,2e6,5e6,1e7")
    p.add_argument("--trace", default=SOURCE)
    p.add_argument("--repeat", type=int, default=2)
    a = p.parse_args()
    ts = load(a.trace, options=LoadOptions(cache=False), executor="serial", progress=False)
    rank = ts.ranks[0]
    rows = []
    for n in (int(float(x)) for x in a.events.split(",")):
        big = TraceSet({rank: tiled(ts.table(rank), n)}, {rank: ts.info(rank)}, ts.metadata)
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            summary = tracekit.analyze(big)
            times.append(time.perf_counter() - t)
        ratio = summary.comm.ranks[0].totals.overlap_ratio
        rows.append(
            {
                "events": n,
                "seconds": min(times),
                "max_seconds": max(times),
                "overlap_ratio": ratio,
                "ns_per_n_log2_n": min(times) / (n * math.log2(n)) * 1e9,
            }
        )
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
