"""Cost of the dependency graph, the replay and the critical path on many ranks.

A generated run: the real 2-rank NCCL trace tests/data/kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz loaded
once and copied to N ranks (each a distinct rank of one world group, its clock shifted by a per-rank offset
that the cross-rank clock alignment has to undo). Prints one JSON line per stage.

    .venv/bin/python benchmarks/critical_path_scale.py --ranks 64
    .venv/bin/python benchmarks/critical_path_scale.py --ranks 64 --collectives 1000
    .venv/bin/python benchmarks/critical_path_scale.py --trace /tmp/t/ddp-500mb.json --repeat 3 --out results.json

With --trace, the given trace files instead (one analysis; a 500 MB one from benchmarks/gen_trace.py, loaded
through the Parquet cache in /tmp so that repeats skip the JSON decode; loading is not timed). --repeat N runs
every stage N times and reports the min and max; --out appends one JSON record per run to a file. Run it with
PYTHONPATH pointing at another checkout to time that checkout's code on the same input.

With --collectives N, a synthetic step instead: every rank runs host ops, launches a kernel and an all-reduce and
waits for it, N times; a small simulator (the oracle of tests/unit/analyzers/test_whatif_oracle.py) gives the
step time with free transfers, which the what-if must predict exactly.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import tracemalloc
import warnings

import numpy as np

import tracekit
from tracekit.analyzers.comm.communication import CommAnalyzer
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import whatif
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import EventTable
from tracekit.model.traceset import RankInfo, RunMetadata, TraceSet

SOURCE = "tests/data/kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz"


def generated(n: int) -> TraceSet:
    one = load([SOURCE], options=LoadOptions(cache=False), executor="serial")
    ((r0, t0),) = list(one)
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


def synthetic(n: int, collectives: int, transfer_factor: float = 1.0, seed: int = 0) -> tuple[TraceSet, int]:
    """(trace set, simulated step time): kernels start at max(launch + 5, stream free); an all-reduce ends 200 ns
    (x transfer_factor) after its last rank arrives; a stream sync returns 3 ns after the device."""
    rng = np.random.default_rng(seed)
    host = {"stream": 1, "device": -1, "step": 0}
    tp = {
        "pg_name": "1",
        "pg_desc": "tracekit:tp",
        "pg_ranks": str(list(range(n))),
        "group_size": n,
        "coll_op": "all_reduce",
        "in_bytes": 4096,
        "out_bytes": 4096,
    }
    rows: list[list[dict]] = [[] for _ in range(n)]
    t = np.zeros(n, np.int64)
    free7, free20 = np.zeros(n, np.int64), np.zeros(n, np.int64)
    corr = 0
    for seq in range(collectives):
        for r in range(n):
            for d in 2 * rng.integers(1, 100, rng.integers(1, 20)):
                rows[r].append({"kind": "CPU_OP", "ts_ns": int(t[r]), "dur_ns": int(d), "name": "aten::op", **host})
                t[r] += d
            k, start = int(2 * rng.integers(1, 300)), max(int(t[r]) + 5, int(free7[r]))
            rows[r] += [
                {"kind": "RUNTIME", "ts_ns": int(t[r]), "dur_ns": 4, "name": "cudaLaunchKernel", "correlation": corr, **host},
                {
                    "kind": "KERNEL",
                    "ts_ns": start,
                    "dur_ns": k,
                    "stream": 7,
                    "device": 0,
                    "step": 0,
                    "name": "k",
                    "correlation": corr,
                },
            ]
            free7[r] = start + k
            t[r] += 4
        arrive = np.maximum(t + 5, free20)
        end = int(arrive.max()) + int(200 * transfer_factor)
        for r in range(n):
            rows[r] += [
                {"kind": "RUNTIME", "ts_ns": int(t[r]), "dur_ns": 4, "name": "cudaLaunchKernel", "correlation": corr + 1, **host},
                {
                    "kind": "COMM",
                    "ts_ns": int(arrive[r]),
                    "dur_ns": end - int(arrive[r]),
                    "stream": 20,
                    "device": 0,
                    "step": 0,
                    "name": "ncclDevKernel_AllReduce",
                    "correlation": corr + 1,
                    "seq": seq,
                    **tp,
                },
            ]
            t[r] += 4
            s_end = max(int(t[r]), end) + 3
            rows[r] += [
                {
                    "kind": "RUNTIME",
                    "ts_ns": int(t[r]),
                    "dur_ns": s_end - int(t[r]),
                    "name": "cudaStreamSynchronize",
                    "correlation": corr + 2,
                    **host,
                },
                {
                    "kind": "SYNC",
                    "ts_ns": int(t[r]),
                    "dur_ns": s_end - int(t[r]),
                    "stream": 20,
                    "device": 0,
                    "step": 0,
                    "name": "Stream Sync",
                    "correlation": corr + 2,
                },
            ]
            t[r] = s_end
        free20[:] = end
        corr += 3
    tables = {}
    for r in range(n):
        rows[r].append({"kind": "STEP", "ts_ns": 0, "dur_ns": int(t[r]) + 10, "name": "ProfilerStep#0", **host})
        tables[r] = EventTable.from_rows(rows[r])
    infos = {r: RankInfo(rank=r, world_size=n, device_type="cuda") for r in range(n)}
    return TraceSet(tables, infos, RunMetadata(world_size=n)), int(t.max()) + 10


def stage(name: str, fn, repeat: int = 1, memory: bool = False):
    """min and max wall time of ``repeat`` plain runs; with ``memory``, one more run under tracemalloc for the peak
    of Python allocations (traced runs are several times slower where many objects are made: never timed)."""
    secs, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t)
    rec = {"stage": name, "seconds": round(min(secs), 3), "seconds_max": round(max(secs), 3)}
    if memory:
        tracemalloc.start()
        fn()
        rec["peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    return out, rec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--collectives", type=int, default=0, help="a synthetic step with this many all-reduces")
    p.add_argument("--trace", nargs="+", help="trace files to load instead of a generated run")
    p.add_argument("--cache-dir", default="/tmp/tracekit-bench-cache", help="Parquet cache for --trace")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--memory", action="store_true", help="also the peak of Python allocations (one traced run)")
    p.add_argument("--out", help="append the records (one JSON object per run) to this file")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    expected = None
    if args.trace:
        ts = load(args.trace, options=LoadOptions(cache_dir=args.cache_dir), executor="serial")
    elif args.collectives:
        ts, _ = synthetic(args.ranks, args.collectives)
        expected = synthetic(args.ranks, args.collectives, 0.0)[1]
    else:
        ts = generated(args.ranks)
    events = sum(len(t) for _, t in ts)
    rep, mem = args.repeat, args.memory
    comm, s1 = stage("comm analysis (existing)", lambda: CommAnalyzer().run(ts), 1, mem)
    g, s2 = stage("build graph", lambda: build_graph(ts, None, comm), rep, mem)
    cp, s3 = stage("critical paths", lambda: critical_paths(ts, graph=g), rep, mem)
    ident, s4 = stage("identity replay, every step", lambda: whatif(ts, graph=g), rep, mem)
    dim = next((str(d) for d in g.dimension if d), "unknown")
    spec = f"comm:{dim}=0"
    pred, s5 = stage(f"whatif {spec}", lambda: whatif(ts, [spec], graph=g), rep, mem)
    _, s6 = stage(f"critical paths under {spec}", lambda: critical_paths(ts, graph=g, specs=[spec]), rep, mem)
    meta = {
        "ranks": len(ts.ranks),
        "events": events,
        "nodes": len(g),
        "edges": len(g.src),
        "steps": len(ident.steps),
        "segments": sum(len(s.segments) for s in cp.steps),
    }
    stages = [s1, s2, s3, s4, s5, s6]
    for s in stages:
        print(json.dumps({**meta, **s}))
    check = {
        "replay_error": ident.replay_error,
        "rounds": ident.rounds,
        "verdict": cp.verdict,
        "by_kind_us": {k: round(sum(s.by_kind_ns[k] for s in cp.steps) / 1e3, 3) for k in cp.steps[0].by_kind_ns}
        if cp.steps
        else {},
        "predicted_us": [round(x.predicted_ns / 1e3, 3) for x in pred.steps],
    }
    if expected is not None:
        check["simulated_free_transfer_ns"] = expected
        check["predicted_ns"] = pred.steps[0].predicted_ns
    print(json.dumps(check))
    if args.out:
        record = {
            "source": args.trace
            or (
                f"synthetic {args.ranks} ranks x {args.collectives}"
                if args.collectives
                else f"generated {args.ranks} ranks from {SOURCE}"
            ),
            "code": tracekit.__file__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "repeat": rep,
            **meta,
            "stages": stages,
            "check": check,
        }
        with open(args.out, "a") as f:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
