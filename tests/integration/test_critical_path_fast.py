"""The vectorised critical-path walk against the previous node-by-node walk (tests/helpers/critical_path_oracle.py,
a verbatim copy of it) on every trace in tests/data, measured and replayed under a what-if: the same segments
(every field), the same sums by kind, rank, dimension and collective (in the same order of first appearance,
which decides ties in the verdict), the same crossings, verdicts and lengths. Both run on the same graph, so a
difference can only come from the walk or the merge."""

from __future__ import annotations

import glob
import os
import warnings

import pytest

from tests.helpers import critical_path_oracle as old
from tracekit.analyzers.critical_path import critical_paths
from tracekit.analyzers.graph import build_graph
from tracekit.loader.io import LoadOptions, load

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
TRACES = sorted(glob.glob(os.path.join(DATA, "kineto-gpu*", "*.json.gz")))
PAIRS = [sorted(glob.glob(os.path.join(DATA, "kineto-gpu", "pp-sendrecv-128rank-rank*.json.gz")))]


def _fields(p) -> tuple:
    """Everything a StepPath holds, as plain values (the oracle's dataclasses are other classes)."""
    segs = tuple((s.rank, s.lane, s.name, s.start_ns, s.dur_ns, s.kind, s.dimension) for s in p.segments)
    cross = tuple((c.from_rank, c.to_rank, c.name, c.dimension, c.wait_ns) for c in p.crossings)
    return (p.step, p.length_ns, list(p.by_kind_ns.items()), list(p.by_dimension_ns.items()),
            list(p.by_rank_kind_ns.items()), list(p.by_collective_ns.items()), segs, cross, p.verdict)


@pytest.mark.parametrize("paths", [[p] for p in TRACES] + PAIRS, ids=lambda ps: "+".join(map(os.path.basename, ps)))
def test_vectorised_walk_equals_the_node_by_node_walk(paths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load(paths, options=LoadOptions(cache=False), executor="serial")
        try:
            g = build_graph(ts)
        except Exception as exc:  # a trace the graph refuses (no events) is refused by both walks alike
            pytest.skip(f"no graph: {exc}")
        for specs in ([], ["kernel:.*=0.5", "annotation:ProfilerStep*=0.5"]):
            new, ref = critical_paths(ts, graph=g, specs=specs), old.critical_paths(ts, graph=g, specs=specs)
            assert len(new.steps) == len(ref.steps)
            for a, b in zip(new.steps, ref.steps):
                assert _fields(a) == _fields(b)
            assert new.verdict == ref.verdict and new.notes == ref.notes
            assert new.to_dict() == ref.to_dict()
