"""The indexed, blocked replay against an independent replay of the same graph (tests/helpers/whatif_oracle.py:
plain lists, a networkx topological order, one node at a time, no tracekit code) on every trace in tests/data, with
blocks of the default size and tiny ones; and the critical path under a what-if, rebinding only the nodes that moved
against rebinding the whole graph: the same segments, sums, crossings and verdicts. (The path itself is checked
against the raw-JSON oracle in test_critical_path_oracle.py.)"""

from __future__ import annotations

import functools
import glob
import os
import warnings

import pytest

from tests.helpers import whatif_oracle
from tracekit.analyzers.graph import critical_path as cp_module
from tracekit.analyzers.graph import whatif as whatif_module
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import Spec, scaled_durations
from tracekit.loader.loading import LoadOptions, load

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
TRACES = sorted(glob.glob(os.path.join(DATA, "kineto-gpu*", "*.json.gz")))
PAIRS = [sorted(glob.glob(os.path.join(DATA, "kineto-gpu", "pp-sendrecv-128rank-rank*.json.gz")))]


@functools.cache
def _graph(paths: tuple[str, ...]):
    """Each trace loaded and its graph built once for both tests (neither test changes them); released with the
    module (see _release)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load(list(paths), options=LoadOptions(cache=False), executor="serial")
        return ts, build_graph(ts)


@pytest.fixture(autouse=True, scope="module")
def _release():
    yield
    _graph.cache_clear()


def _fields(p) -> tuple:
    """Everything a StepPath holds, as plain values (the oracle's dataclasses are other classes)."""
    segs = tuple((s.rank, s.lane, s.name, s.start_ns, s.dur_ns, s.kind, s.dimension) for s in p.segments)
    cross = tuple((c.from_rank, c.to_rank, c.name, c.dimension, c.wait_ns) for c in p.crossings)
    return (
        p.step,
        p.length_ns,
        list(p.by_kind_ns.items()),
        list(p.by_dimension_ns.items()),
        list(p.by_rank_kind_ns.items()),
        list(p.by_collective_ns.items()),
        segs,
        cross,
        p.verdict,
    )


@pytest.mark.parametrize("paths", [[p] for p in TRACES] + PAIRS, ids=lambda ps: "+".join(map(os.path.basename, ps)))
def test_rebinding_what_moved_equals_rebinding_everything(paths, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, g = _graph(tuple(paths))
        specs = ["kernel:.*=0.5", "annotation:ProfilerStep*=0.5"]
        monkeypatch.setattr(cp_module, "REBIND_ALL", 0)
        part = critical_paths(ts, graph=g, specs=specs)
        monkeypatch.setattr(cp_module, "REBIND_ALL", 10**9)
        whole = critical_paths(ts, graph=g, specs=specs)
        assert [_fields(a) for a in part.steps] == [_fields(b) for b in whole.steps]
        assert part.to_dict() == whole.to_dict()


@pytest.mark.parametrize("paths", [[p] for p in TRACES] + PAIRS, ids=lambda ps: "+".join(map(os.path.basename, ps)))
@pytest.mark.parametrize("block", [None, 64])
def test_indexed_replay_equals_the_independent_replay(paths, block, monkeypatch):
    if block is not None:  # tiny blocks: the blocked solve (and its give-up to one block) on real traces
        monkeypatch.setattr(whatif_module, "BLOCK_NODES", block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, g = _graph(tuple(paths))
        data = whatif_oracle.graph_arrays(g)
        for specs in ([], ["kernel:.*=0.5"], ["comm:unknown=0", "annotation:ProfilerStep*=0.3"]):
            dur = scaled_durations(g, ts, [Spec.parse(x) for x in specs])[0]
            assert whatif_module.predicted_step_times(g, dur)[0] == whatif_oracle.predicted_step_times(data, dur.tolist())
