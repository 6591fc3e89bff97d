"""The straggler experiment of issue #14, full size: does ``whatif --set annotation:tracekit:delay=0`` on a run
with ``--delay 1:40`` predict the same run without the delay?

For each workload (dp, tp-sp), REPS delayed / undelayed pairs run interleaved in one set of spawned gloo processes
(rank r pinned to CPU r, ``TRACEKIT_PIN_CPUS=1``; the host's load drifts, so the pairs alternate), larger shapes
than the test's so that compute, not fixed per-collective costs, makes most of a step, warm-up steps excluded
(``--warmup``, ``--wait``). Nothing is fitted: the prediction is the replay of the delayed run's measured graph.

Every step of both runs is split into the same parts, so that a miss can be traced to the part that differs:
per rank, the measured durations the replay keeps (``compute``: CPU op pieces; ``host``: other host pieces,
the delay excluded; ``transfer``: gloo worker spans from the last arrival on; ``issue_lag``: caller's issue to
the worker span's start, the worker's wake-up; ``wait_return``: the span's end to the caller's return from
Work.wait) and, over all ranks, the critical path's kinds (of the measured undelayed step, of the replayed
delayed one; they add up to the step).

    .venv/bin/python benchmarks/straggler.py                       # ~2-4 min on 2 cores, prints one table
    .venv/bin/python benchmarks/straggler.py --reps 2 --steps 4 --out /tmp/straggler.json --keep /tmp/runs

Writes JSON (``--out``, default benchmarks/results-straggler.json): per workload the predicted and undelayed step
times (µs, every step of every repetition), the ratio of their medians, per-repetition ratios (the spread), the
interquartile spread of each, the identity-replay error, the parts, and the load average before and after.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from tracekit.analyzers.comm.communication import CommAnalyzer
from tracekit.analyzers.graph.build import COMPUTE, GLOO_WAIT, HOST, HOST_CHAIN, ISSUE, KINDS, TRANSFER, WORKER_CHAIN, build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import Spec, scaled_durations, whatif
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch
from tracekit.loader.loading import load

SPEC = "annotation:tracekit:delay=0"
PARTS = ("compute", "host", "issue_call", "transfer", "issue_lag", "wait_return")


def _c10d_pieces(g, ts) -> np.ndarray:
    """Host pieces inside a c10d op (the caller's issue call: on one pinned CPU, the worker it wakes runs inside it)."""
    hit = np.zeros(len(g), bool)
    for r, t in ts:
        names = np.array([s.startswith("c10d::") for s in t.strings] + [False], bool)
        on = np.flatnonzero((g.rank == r) & (g.row >= 0))
        nid = t["name_id"][g.row[on]]
        hit[on] = names[np.where(nid < 0, len(t.strings), nid)]
    return hit


def rank_parts(g, dur: np.ndarray, c10d: np.ndarray) -> dict[int, dict[str, dict[int, float]]]:
    """step -> part -> rank -> µs: the durations (as the replay uses them) of each rank's nodes that start in its
    step window."""
    ct = g.chain_type[g.chain]
    host, worker = ct == HOST_CHAIN, ct == WORKER_CHAIN
    issue_delay = np.zeros(len(g), np.int64)
    e = g.etype == ISSUE
    np.add.at(issue_delay, g.dst[e], g.delay[e])
    after_wait = np.zeros(len(g), bool)
    after_wait[g.dst[g.etype == GLOO_WAIT]] = True
    sel = {
        "compute": (host & (g.kind == COMPUTE) & ~c10d, dur),
        "host": (host & (g.kind == HOST) & ~c10d, dur),
        "issue_call": (host & c10d, dur),
        "transfer": (worker & (g.kind == TRANSFER), dur),
        "issue_lag": (worker, issue_delay),
        "wait_return": (host & after_wait, dur),
    }
    out: dict[int, dict[str, dict[int, float]]] = {}
    for w in g.windows:
        inside = (g.rank == w.rank) & (g.start >= w.start_ns) & (g.start < w.end_ns)
        step = out.setdefault(w.step, {p: {} for p in PARTS})
        for part, (mask, values) in sel.items():
            step[part][w.rank] = float(values[inside & mask].sum()) / 1e3
    return out


def analyse(run_dir: Path, delayed: bool) -> dict:
    """Step times (measured; predicted without the delay when ``delayed``), parts per step, critical-path kinds."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load([str(run_dir)])
        g = build_graph(ts, None, CommAnalyzer().run(ts))
    specs = [SPEC] if delayed else []
    w = whatif(ts, specs, graph=g)
    dur = scaled_durations(g, ts, [Spec.parse(s) for s in specs])[0]
    paths = critical_paths(ts, graph=g, specs=specs)
    return {
        "steps": [s.step for s in w.steps],
        "measured_us": [s.measured_ns / 1e3 for s in w.steps],
        "predicted_us": [s.predicted_ns / 1e3 for s in w.steps],
        "replay_error": w.replay_error,
        "notes": list(w.notes),
        "parts": [v for _, v in sorted(rank_parts(g, dur, _c10d_pieces(g, ts)).items())],
        "path": [{k: s.by_kind_ns.get(k, 0) / 1e3 for k in KINDS} for s in paths.steps],
    }


def spread(xs: list[float]) -> float:
    """Interquartile range over median."""
    if len(xs) < 2:
        return 0.0
    q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return (q3 - q1) / med if med else 0.0


def part_medians(docs: list[dict]) -> dict[str, float]:
    """part (per rank: "compute r0") and path kind -> median over every step of the runs."""
    rows: dict[str, list[float]] = {}
    for d in docs:
        for step in d["parts"]:
            for part, by_rank in step.items():
                for r, v in by_rank.items():
                    rows.setdefault(f"{part} r{r}", []).append(v)
        for path in d["path"]:
            for k, v in path.items():
                rows.setdefault(f"path {k}", []).append(v)
    return {k: statistics.median(v) for k, v in rows.items()}


def experiment(workload: str, shape: dict, reps: int, base: Path) -> dict:
    jobs = [
        (
            WorkloadConfig(workload=workload, delay="1:40" if late else None, **shape),
            base / f"{workload}-{i}-{'late' if late else 'base'}",
        )
        for i in range(reps)
        for late in (True, False)
    ]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    run_batch(jobs)
    run_s = time.perf_counter() - t0
    load_after = os.getloadavg()
    late = [analyse(d, True) for c, d in jobs if c.delay]
    plain = [analyse(d, False) for c, d in jobs if not c.delay]
    predicted = [x for d in late for x in d["predicted_us"]]
    undelayed = [x for d in plain for x in d["measured_us"]]
    per_rep = [statistics.median(a["predicted_us"]) / statistics.median(b["measured_us"]) for a, b in zip(late, plain)]
    notes = sorted({n for d in late + plain for n in d["notes"]})
    pred_parts, base_parts = part_medians(late), part_medians(plain)
    return {
        "workload": workload,
        "shape": shape,
        "reps": reps,
        "run_s": run_s,
        "load_before": load_before,
        "load_after": load_after,
        "notes": notes,
        "predicted_us": predicted,
        "undelayed_us": undelayed,
        "delayed_measured_us": [x for d in late for x in d["measured_us"]],
        "ratio": statistics.median(predicted) / statistics.median(undelayed),
        "ratio_per_rep": per_rep,
        "undelayed_spread": spread(undelayed),
        "predicted_spread": spread(predicted),
        "replay_error": max(d["replay_error"] for d in late + plain),
        "parts": {
            k: {"undelayed_us": base_parts.get(k, 0.0), "predicted_us": pred_parts.get(k, 0.0)}
            for k in sorted(set(base_parts) | set(pred_parts))
        },
    }


def experiment_alternate(workload: str, shape: dict, reps: int, base: Path) -> dict:
    """Delayed and undelayed steps of the same run (TRACEKIT_DELAY_EVERY=2: odd steps sleep), adjacent in time:
    what a changing host load cannot explain. Predicted: the delayed steps without the delay; undelayed: the
    other steps of the same run."""
    jobs = [(WorkloadConfig(workload=workload, delay="1:40", **shape), base / f"{workload}-{i}-alt") for i in range(reps)]
    load_before = os.getloadavg()
    os.environ["TRACEKIT_DELAY_EVERY"] = "2"
    t0 = time.perf_counter()
    try:
        run_batch(jobs)
    finally:
        del os.environ["TRACEKIT_DELAY_EVERY"]
    run_s = time.perf_counter() - t0
    load_after = os.getloadavg()
    docs = [analyse(d, True) for _, d in jobs]
    sleep = [x for _, d in jobs for x in peer_sleep(d)]
    late = [_subset(d, odd=True) for d in docs]
    plain = [_subset(d, odd=False) for d in docs]
    predicted = [x for d in late for x in d["predicted_us"]]
    undelayed = [x for d in plain for x in d["measured_us"]]
    per_rep = [statistics.median(a["predicted_us"]) / statistics.median(b["measured_us"]) for a, b in zip(late, plain)]
    pred_parts, base_parts = part_medians(late), part_medians(plain)
    return {
        "workload": workload + " alt",
        "shape": shape,
        "reps": reps,
        "run_s": run_s,
        "load_before": load_before,
        "load_after": load_after,
        "notes": sorted({n for d in docs for n in d["notes"]}),
        "predicted_us": predicted,
        "undelayed_us": undelayed,
        "delayed_measured_us": [x for d in late for x in d["measured_us"]],
        "ratio": statistics.median(predicted) / statistics.median(undelayed),
        "ratio_per_rep": per_rep,
        "undelayed_spread": spread(undelayed),
        "predicted_spread": spread(predicted),
        "replay_error": max(d["replay_error"] for d in docs),
        "peer_sleep_us": sleep,
        "peer_sleep_ratio": statistics.median([a / b for a, b in sleep if b]) if any(b for _, b in sleep) else None,
        "parts": {
            k: {"undelayed_us": base_parts.get(k, 0.0), "predicted_us": pred_parts.get(k, 0.0)}
            for k in sorted(set(base_parts) | set(pred_parts))
        },
    }


def _leaf_ops(path: Path) -> dict[int, tuple[list[dict], list[dict]]]:
    """step -> (the leaf CPU ops of the rank's step thread, in order, c10d calls left out; its tracekit:delay)."""
    with gzip.open(path) as fh:
        xs = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]), e["tid"]) for e in xs if e["name"].startswith("ProfilerStep#")
    )
    ops = sorted(
        (e for e in xs if steps and e["tid"] == steps[0][3] and e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"])
    )
    out = {}
    for lo, hi, n, _ in steps:
        inside = [e for e in ops if lo <= e["ts"] < hi]
        leaves = [e for i, e in enumerate(inside) if not (i + 1 < len(inside) and inside[i + 1]["ts"] < e["ts"] + e["dur"])]
        out[n] = (
            [e for e in leaves if not e["name"].startswith("c10d::")],
            [e for e in xs if e["name"] == "tracekit:delay" and lo <= e["ts"] < hi],
        )
    return out


def peer_sleep(run_dir: Path) -> list[tuple[float, float]]:
    """Rank 0's compute while rank 1 sleeps, against the same ops in the run's undelayed steps: per delayed step,
    (µs of rank 0's leaf ops that ran inside rank 1's delay, median µs of those ops in the undelayed steps). A ratio
    below 1: rank 0 computes faster while its peer sleeps (a duration the replay keeps, though the undelayed run
    never sees it). Steps whose op count differs are left out."""
    r0, r1 = _leaf_ops(run_dir / "rank0.trace.json.gz"), _leaf_ops(run_dir / "rank1.trace.json.gz")
    plain = [n for n in r0 if n in r1 and not r1[n][1]]
    out = []
    for n, (ops, _) in r0.items():
        if n not in r1 or not r1[n][1]:
            continue
        a = r1[n][1][0]["ts"]
        b = a + r1[n][1][0]["dur"]
        js = [j for j, e in enumerate(ops) if a <= e["ts"] and e["ts"] + e["dur"] <= b]
        same = [sum(r0[m][0][j]["dur"] for j in js) for m in plain if len(r0[m][0]) == len(ops)]
        if js and same:
            out.append((float(sum(ops[j]["dur"] for j in js)), float(statistics.median(same))))
    return out


def _subset(doc: dict, odd: bool) -> dict:
    keep = [i for i, s in enumerate(doc["steps"]) if (s % 2 == 1) == odd]
    return {k: [v[i] for i in keep] if isinstance(v, list) and k != "notes" else v for k, v in doc.items()}


def table(results: list[dict]) -> str:
    lines = [f"{'workload':<8} {'what':<22} {'undelayed':>11} {'predicted':>11} {'ratio':>6}  notes"]
    for r in results:
        med_u, med_p = statistics.median(r["undelayed_us"]), statistics.median(r["predicted_us"])
        lo, hi = min(r["ratio_per_rep"]), max(r["ratio_per_rep"])
        lines.append(
            f"{r['workload']:<8} {'step (median)':<22} {med_u / 1e3:>9.2f}ms {med_p / 1e3:>9.2f}ms "
            f"{r['ratio']:>6.3f}  per rep {lo:.3f}-{hi:.3f}; IQR/median undelayed "
            f"{100 * r['undelayed_spread']:.0f} %, predicted {100 * r['predicted_spread']:.0f} %; "
            f"{len(r['undelayed_us'])} steps; load {r['load_before'][0]:.1f}->{r['load_after'][0]:.1f}"
        )
        if r.get("peer_sleep_ratio") is not None:
            a, b = sum(x for x, _ in r["peer_sleep_us"]), sum(y for _, y in r["peer_sleep_us"])
            lines.append(
                f"{'':<8} {'r0 ops in r1 sleep':<22} {b / 1e3:>9.2f}ms {a / 1e3:>9.2f}ms "
                f"{r['peer_sleep_ratio']:>6.2f}  rank 0's leaf ops while rank 1 sleeps vs the same ops in "
                f"undelayed steps (median ratio over {len(r['peer_sleep_us'])} steps)"
            )
        for k, v in r["parts"].items():
            u, p = v["undelayed_us"], v["predicted_us"]
            if max(u, p) >= 0.005 * med_u:
                ratio = f"{p / u:>6.2f}" if u else f"{'-':>6}"
                lines.append(f"{'':<8} {k:<22} {u / 1e3:>9.2f}ms {p / 1e3:>9.2f}ms {ratio}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="dp,tp-sp")
    ap.add_argument("--reps", type=int, default=4, help="delayed/undelayed pairs per workload")
    ap.add_argument("--steps", type=int, default=10, help="profiled steps per run")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--wait", type=int, default=1)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument(
        "--alternate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run each workload with the delay on every other step (TRACEKIT_DELAY_EVERY=2)",
    )
    ap.add_argument("--out", default="benchmarks/results-straggler.json")
    ap.add_argument("--keep", help="write the runs here (default: a temporary directory, removed)")
    args = ap.parse_args(argv)
    os.environ["TRACEKIT_PIN_CPUS"] = "1"
    shape = dict(
        layers=args.layers,
        seq=args.seq,
        hidden=args.hidden,
        heads=args.heads,
        batch=args.batch,
        steps=args.steps,
        warmup=args.warmup,
        wait=args.wait,
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        results = []
        for wl in args.workloads.split(","):
            results.append(experiment(wl, shape, args.reps, base))
            if args.alternate:
                results.append(experiment_alternate(wl, shape, args.reps, base))
    doc = {
        "benchmark": "straggler",
        "spec": SPEC,
        "delay": "1:40",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "wall_s": time.perf_counter() - t0,
        "results": results,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print(table(results))
    print(f"wall {doc['wall_s']:.0f} s; JSON: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
