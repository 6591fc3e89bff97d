"""tracekit's critical path against HTA 0.5.0's ``critical_path_analysis`` on every single-rank GPU trace in
tests/data and shared/traces (issue 26 item 7): per window (each ProfilerStep, or an annotation's instance) both
path lengths, their ratio and their splits, as the table in docs/whatif.md. HTA runs in its own environment
(tests/helpers/hta_env.py: pandas < 3).

    PYTHONPATH=. .venv/bin/python benchmarks/critical_path_hta.py [--out benchmarks/results-critical-path-hta.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import warnings

from tests.helpers.hta_env import run_hta
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.loader.loading import LoadOptions, load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALEXNET = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
WINDOWS = {"critical-path-alexnet.json.gz": ALEXNET}  # traces without ProfilerStep that have an annotation to take


def traces() -> list[str]:
    local = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "kineto-gpu*", "*.json.gz")))
    names = {os.path.basename(p) for p in local}
    shared = sorted(glob.glob("/work/shared/traces/kineto-gpu*/*.json.gz"))
    return [p for p in local + [s for s in shared if os.path.basename(s) not in names] if "cpu-only" not in p]


def compare(path: str) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load([path], options=LoadOptions(cache=False), executor="serial")
        window = WINDOWS.get(os.path.basename(path))
        ours = critical_paths(ts, windows=window).steps
    if window is None and ours and ours[0].step == -1:
        return [{"trace": os.path.basename(path), "window": "whole trace", "note": "no ProfilerStep: HTA needs an annotation"}]
    hta = run_hta(path, window or "ProfilerStep", list(range(len(ours))))
    rows = []
    for p, h in zip(ours, hta):
        row = {
            "trace": os.path.basename(path),
            "window": f"{window or 'ProfilerStep'} #{p.step}",
            "tracekit_us": p.length_ns / 1e3,
        }
        row.update(tracekit_by={k: v / 1e3 for k, v in p.by_kind_ns.items() if v}, bound=p.bound)
        row.update(unexplained_us=p.unexplained_ns / 1e3)
        if "error" in h:
            row["hta_error"] = h["error"]
        else:
            row.update(hta_us=h["length_us"], hta_by=h["by"], ratio=p.length_ns / 1e3 / h["length_us"])
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results-critical-path-hta.json"))
    args = ap.parse_args()
    rows = [r for p in traces() for r in compare(p)]
    for r in rows:
        print(json.dumps(r))
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
