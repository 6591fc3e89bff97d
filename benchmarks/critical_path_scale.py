"""Cost of the dependency graph, the replay and the critical path on many ranks.

A generated run: the real 2-rank NCCL trace tests/data/kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz loaded
once and copied to N ranks (each a distinct rank of one world group, its clock shifted by a per-rank offset
that the cross-rank clock alignment has to undo). Prints one JSON line per stage.

    .venv/bin/python benchmarks/critical_path_scale.py --ranks 64
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
import warnings

import numpy as np

from tracekit.analyzers.critical_path import critical_paths
from tracekit.analyzers.graph import build_graph
from tracekit.analyzers.run import CommAnalyzer
from tracekit.analyzers.whatif import whatif
from tracekit.loader.io import LoadOptions, load
from tracekit.model.traceset import RankInfo, TraceSet

SOURCE = "tests/data/kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz"


def generated(n: int) -> TraceSet:
    one = load([SOURCE], options=LoadOptions(cache=False), executor="serial")
    (r0, t0), = list(one)
    ranks = str(list(range(n)))
    strings = t0.strings + (ranks,)
    rid = len(t0.strings)
    tables, infos = {}, {}
    for r in range(n):
        shift = np.int64(r * 1_000_003)  # a clock offset per rank
        cols = dict(t0.columns)
        cols["ts_ns"] = t0["ts_ns"] + shift
        has = cols["pg_ranks_id"] >= 0
        cols["pg_ranks_id"] = np.where(has, rid, -1).astype(np.int32)
        cols["group_size"] = np.where(has, n, cols["group_size"]).astype(np.int32)
        tables[r] = type(t0)(cols, strings)
        infos[r] = RankInfo(rank=r, world_size=n, device_type="cuda")
    return TraceSet(tables, infos, one.metadata)


def stage(name: str, fn):
    tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, {"stage": name, "seconds": round(dt, 3), "peak_mb": round(peak / 2**20, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=64)
    args = p.parse_args()
    warnings.simplefilter("ignore")
    ts = generated(args.ranks)
    events = sum(len(t) for _, t in ts)
    comm, s1 = stage("comm analysis (existing)", lambda: CommAnalyzer().run(ts))
    g, s2 = stage("build graph", lambda: build_graph(ts, None, comm))
    ident, s3 = stage("identity replay, every step", lambda: whatif(ts, graph=g))
    dim = next((str(d) for d in g.dimension if d), "unknown")
    pred, s4 = stage(f"whatif comm:{dim}=0", lambda: whatif(ts, [f"comm:{dim}=0"], graph=g))
    cp, s5 = stage("critical paths", lambda: critical_paths(ts, graph=g))
    for s in (s1, s2, s3, s4, s5):
        print(json.dumps({"ranks": args.ranks, "events": events, "nodes": len(g), "edges": len(g.src), **s}))
    print(json.dumps({"replay_error": ident.replay_error, "rounds": ident.rounds,
                      "steps": [x.to_dict() for x in pred.steps], "verdict": cp.verdict}))


if __name__ == "__main__":
    main()
