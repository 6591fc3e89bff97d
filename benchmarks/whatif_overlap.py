"""What-if against what really happens, issue #26 item 8b: does ``whatif --set comm:DIM=0`` on a plain run predict
the same workload's ``--overlap`` run, where the communication is hidden under compute?

"Comm free" is what an overlap that hides every collective gives, so the prediction is a bound the overlap run
reaches only where it hides all of its communication and the hiding costs the compute nothing. On CPU neither
holds: gloo's worker threads share the two cores with the compute they hide under (the ``--overlap`` run's
compute is slower than the plain run's), and the overlap variants hide a part of their communication (README,
"Overlap ratio per rank"). The benchmark therefore reports, beside the prediction error, the two things that
account for it: the overlap run's measured overlap ratio and its compute against the plain run's.

For each workload, REPS plain / ``--overlap`` pairs run interleaved in one batch of spawned gloo processes (the
host's load drifts), warm-up steps excluded. Nothing is fitted: the prediction is the replay of the plain run's
measured graph with every communication dimension it has made free.

    .venv/bin/python benchmarks/whatif_overlap.py                   # ~2-4 min on 2 cores, prints one table
    .venv/bin/python benchmarks/whatif_overlap.py --reps 2 --out /tmp/overlap.json

Writes JSON (``--out``, default benchmarks/results-whatif-overlap.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

from tracekit.analyzers import analyze
from tracekit.analyzers.graph.whatif import whatif
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch
from tracekit.loader.loading import load

# shapes whose communication is a good part of the step on 2 CPU cores (dp: few tokens per parameter)
SHAPES = {
    "dp": dict(layers=2, seq=32, hidden=512, heads=4, batch=2, steps=8, warmup=2, wait=1),
    "tp-sp": dict(layers=1, seq=256, hidden=256, heads=4, batch=4, steps=8, warmup=2, wait=1),
    "cp-ring": dict(layers=1, seq=256, hidden=256, heads=4, batch=4, steps=8, warmup=2, wait=1),
}
WORKLOADS = tuple(SHAPES)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def measure(run_dir: Path, predict: bool) -> dict:
    """Per step (µs): measured; with ``predict``, the replay with every communication dimension free. Over the
    steps: compute, exposed and hidden communication per rank (the analysis' own figures), overlap ratio, and the
    critical path's explained share."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load([str(run_dir)])
        summary = analyze(ts, critical_path=True).to_dict()
        dims = sorted({d["dimension"] for d in summary.get("by_dimension") or [] if d.get("dimension")})
        specs = [f"comm:{d}=0" for d in dims] if predict else []
        w = whatif(ts, specs)
    ranks = summary["ranks"]
    paths = summary["critical_path"]["steps"]
    return {
        "dims": dims,
        "specs": specs,
        "measured_us": [s.measured_ns / 1e3 for s in w.steps],
        "predicted_us": [s.predicted_ns / 1e3 for s in w.steps] if predict else [],
        "notes": list(w.notes),
        "compute_us": _median([st["compute_us"] for r in ranks for st in r["steps"]]),
        "exposed_comm_us": _median([st["exposed_comm_us"] for r in ranks for st in r["steps"]]),
        "hidden_comm_us": _median([st["hidden_comm_us"] for r in ranks for st in r["steps"]]),
        "overlap_ratio": _median(
            [st["overlap_ratio"] for r in ranks for st in r["steps"] if st.get("overlap_ratio") is not None]
        ),
        "explained_share": _median([p["explained_us"] / p["length_us"] for p in paths if p["length_us"]]),
    }


def experiment(workload: str, reps: int, base: Path) -> dict:
    shape = SHAPES[workload]
    jobs = [
        (WorkloadConfig(workload=workload, overlap=ov, **shape), base / f"{workload}-{i}-{'overlap' if ov else 'plain'}")
        for i in range(reps)
        for ov in (False, True)
    ]
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    run_batch(jobs)
    run_s = time.perf_counter() - t0
    plain = [measure(d, True) for c, d in jobs if not c.overlap]
    over = [measure(d, False) for c, d in jobs if c.overlap]
    predicted = [x for d in plain for x in d["predicted_us"]]
    measured_overlap = [x for d in over for x in d["measured_us"]]
    measured_plain = [x for d in plain for x in d["measured_us"]]
    per_rep = [_median(a["predicted_us"]) / _median(b["measured_us"]) for a, b in zip(plain, over)]
    return {
        "workload": workload,
        "shape": SHAPES[workload],
        "reps": reps,
        "run_s": run_s,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "specs": plain[0]["specs"],
        "notes": sorted({n for d in plain for n in d["notes"]}),
        "plain_us": measured_plain,
        "predicted_us": predicted,
        "overlap_us": measured_overlap,
        # predicted / measured --overlap step time (medians); 1 is exact, < 1 the prediction is faster
        "ratio": _median(predicted) / _median(measured_overlap),
        "ratio_per_rep": per_rep,
        "plain_explained_share": _median([d["explained_share"] for d in plain]),
        "plain": {
            k: _median([d[k] for d in plain]) for k in ("compute_us", "exposed_comm_us", "hidden_comm_us", "overlap_ratio")
        },
        "overlap": {
            k: _median([d[k] for d in over]) for k in ("compute_us", "exposed_comm_us", "hidden_comm_us", "overlap_ratio")
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--out", default=str(Path(__file__).with_name("results-whatif-overlap.json")))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        results = [experiment(w, args.reps, Path(tmp)) for w in args.workloads.split(",")]
    doc = {
        "benchmark": "whatif-overlap",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "wall_s": time.perf_counter() - t0,
        "results": results,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    head = f"{'workload':10} {'plain ms':>9} {'predicted':>9} {'overlap':>9} {'pred/ovl':>8} {'explained':>9}"
    head += f" {'ovl ratio':>9} {'compute plain/ovl ms':>21}"
    print(head)
    for r in results:
        print(
            f"{r['workload']:10} {_median(r['plain_us']) / 1e3:9.1f} {_median(r['predicted_us']) / 1e3:9.1f} "
            f"{_median(r['overlap_us']) / 1e3:9.1f} {r['ratio']:8.3f} {r['plain_explained_share']:9.1%} "
            f"{r['overlap']['overlap_ratio']:9.2f} {r['plain']['compute_us'] / 1e3:10.1f} / "
            f"{r['overlap']['compute_us'] / 1e3:.1f}"
        )
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
