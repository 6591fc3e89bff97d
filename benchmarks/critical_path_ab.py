"""Old against new in one process, alternating, on the same graph: the critical-path walk and the windowed replay
of tracekit (tracekit.analyzers) against their previous implementations kept as test oracles
(tests/helpers/critical_path_oracle.py, whatif_oracle.py). On a machine shared with other jobs, alternating
runs in one process is the fair comparison (separate processes see different loads). Prints one JSON line per
stage: min and max seconds of each side and whether both gave the same result.

    PYTHONPATH=. .venv/bin/python benchmarks/critical_path_ab.py --trace /tmp/t/ddp-500mb.json --repeat 3
    PYTHONPATH=. .venv/bin/python benchmarks/critical_path_ab.py --ranks 64 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from critical_path_scale import generated

from tests.helpers import critical_path_oracle as old_cp
from tests.helpers import whatif_oracle as old_whatif
from tracekit.analyzers.graph import whatif as new_whatif
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import Spec, scaled_durations
from tracekit.loader.loading import LoadOptions, load


def _plain(paths) -> list:
    """A result as plain values (the oracle's classes are other classes)."""
    return [
        (
            s.step,
            s.length_ns,
            list(s.by_kind_ns.items()),
            [(x.rank, x.lane, x.name, x.start_ns, x.dur_ns, x.kind, x.dimension) for x in s.segments],
        )
        for s in paths.steps
    ]


def _same(a, b) -> bool:
    """Equal results, compared outside the timed calls."""
    return _plain(a) == _plain(b) if hasattr(a, "steps") else a == b


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--trace", nargs="+")
    p.add_argument("--cache-dir", default="/tmp/tracekit-bench-cache")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out")
    args = p.parse_args()
    warnings.simplefilter("ignore")
    ts = (
        load(args.trace, options=LoadOptions(cache_dir=args.cache_dir), executor="serial")
        if args.trace
        else generated(args.ranks)
    )
    g = build_graph(ts)
    dim = next((str(d) for d in g.dimension if d), "unknown")
    dur = scaled_durations(g, ts, [Spec.parse(f"comm:{dim}=0")])[0]
    cases = {
        "critical paths": (lambda: old_cp.critical_paths(ts, graph=g), lambda: critical_paths(ts, graph=g)),
        "replay every step (what-if)": (
            lambda: old_whatif.predicted_step_times(g, dur),
            lambda: new_whatif.predicted_step_times(g, dur),
        ),
        "critical paths under a what-if": (
            lambda: old_cp.critical_paths(ts, graph=g, specs=[f"comm:{dim}=0"]),
            lambda: critical_paths(ts, graph=g, specs=[f"comm:{dim}=0"]),
        ),
    }
    meta = {
        "source": args.trace or f"generated {args.ranks} ranks",
        "events": sum(len(t) for _, t in ts),
        "nodes": len(g),
        "edges": len(g.src),
        "steps": len({w.step for w in g.windows}),
    }
    for name, (old, new) in cases.items():
        secs: dict[str, list[float]] = {"old": [], "new": []}
        outs = {}
        for _ in range(args.repeat):
            for side, fn in (("old", old), ("new", new)):
                t = time.perf_counter()
                outs[side] = fn()
                secs[side].append(time.perf_counter() - t)
        rec = {
            **meta,
            "stage": name,
            **{f"{k}_s": [round(min(v), 3), round(max(v), 3)] for k, v in secs.items()},
            "speedup_min": round(min(secs["old"]) / min(secs["new"]), 1),
            "identical": _same(outs["old"], outs["new"]),
        }
        print(json.dumps(rec))
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
