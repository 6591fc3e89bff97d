"""The vectorised critical-path walk and the indexed replay against their previous implementations
(tests/helpers/critical_path_oracle.py and whatif_oracle.py, verbatim copies) on every trace in tests/data: the
same segments (every field), the same sums by kind, rank, dimension and collective (in the same order of first
appearance, which decides ties in the verdict), the same crossings, verdicts and lengths, measured and replayed
under a what-if; the same predicted step times and rounds, with blocks of the default size and tiny ones. Both
run on the same graph, so a difference can only come from the walk, the merge or the replay."""

from __future__ import annotations

import functools
import glob
import os
import warnings

import pytest

from tests.helpers import critical_path_oracle as old
from tests.helpers import whatif_oracle as old_whatif
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
@pytest.mark.parametrize("rebind_all", [0, 10**9])  # under a what-if: rebind only what moved / always the whole graph
def test_vectorised_walk_equals_the_node_by_node_walk(paths, rebind_all, monkeypatch):
    monkeypatch.setattr(cp_module, "REBIND_ALL", rebind_all)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, g = _graph(tuple(paths))
        for specs in ([], ["kernel:.*=0.5", "annotation:ProfilerStep*=0.5"]):
            new, ref = critical_paths(ts, graph=g, specs=specs), old.critical_paths(ts, graph=g, specs=specs)
            assert len(new.steps) == len(ref.steps)
            for a, b in zip(new.steps, ref.steps):
                assert _fields(a) == _fields(b)
            assert new.verdict == ref.verdict and new.notes == ref.notes
            assert new.to_dict() == ref.to_dict()


@pytest.mark.parametrize("paths", [[p] for p in TRACES] + PAIRS, ids=lambda ps: "+".join(map(os.path.basename, ps)))
@pytest.mark.parametrize("block", [None, 64])
def test_indexed_replay_equals_the_full_size_replay(paths, block, monkeypatch):
    if block is not None:  # tiny blocks: the blocked solve (and its give-up to one block) on real traces
        monkeypatch.setattr(whatif_module, "BLOCK_NODES", block)
        monkeypatch.setattr(old_whatif, "BLOCK_NODES", block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts, g = _graph(tuple(paths))
        for specs in ([], ["kernel:.*=0.5"], ["comm:unknown=0", "annotation:ProfilerStep*=0.3"]):
            dur = scaled_durations(g, ts, [Spec.parse(x) for x in specs])[0]
            assert whatif_module.predicted_step_times(g, dur) == old_whatif.predicted_step_times(g, dur)
