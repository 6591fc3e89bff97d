"""The per-rank map (tracekit/analyzers/files.py, per_rank.py) against the plain path: analysing each rank where it
loads and only the cross-rank work in the parent gives the summary, the timeline and the critical path that
``analyze(load(...))`` gives, and the parent reads a rank's table back only when one is asked for."""

from __future__ import annotations

import pytest

from tests.helpers.multirank import generate
from tests.helpers.rank_layout import Layout
from tracekit.analyzers import analyze
from tracekit.analyzers.comm.timeline_record import build_timeline
from tracekit.analyzers.files import analyze_files
from tracekit.analyzers.per_rank import ReloadedTables
from tracekit.loader.loading import LoadOptions, load


@pytest.fixture(scope="module")
def run8(tmp_path_factory):
    """8 ranks (tp 2 × pp 2 × dp 2) of one real step each, a straggler, host clock offsets."""
    out = tmp_path_factory.mktemp("run8")
    generate(str(out), Layout(2, 2, 2), gpus_per_node=2, workers=1)
    return str(out)


def test_summary_and_timeline_equal_the_plain_path(run8):
    options = LoadOptions(cache=False)
    plain = analyze(load([run8], options=options, executor="serial", progress=False))
    mapped = analyze_files([run8], options=options, executor="serial", progress=False)
    assert mapped.to_dict() == plain.to_dict()
    assert isinstance(mapped.traces.tables, ReloadedTables)
    assert mapped.traces.tables.reads == 0  # the summary needed no table
    assert mapped.timeline() == plain.timeline()
    assert mapped.traces.tables.reads == 8  # the timeline draws every rank of 8: each read back once
    intervals, collectives = mapped.annotation(3)
    assert (intervals, collectives) == plain.annotation(3)


@pytest.mark.slow
def test_critical_path_keeps_the_tables_and_equals_the_plain_path(run8):
    options = LoadOptions(cache=False)
    plain = analyze(load([run8], options=options, executor="serial", progress=False), critical_path=True)
    mapped = analyze_files([run8], options=options, executor="serial", progress=False, critical_path=True)
    assert isinstance(mapped.traces.tables, dict)
    assert mapped.to_dict() == plain.to_dict()
    assert mapped.to_dict()["critical_path"]["steps"]


def test_options_reach_the_workers(run8):
    """--window, --dim-map and the memory points are the per-rank analyses' options as much as the parent's."""
    options = LoadOptions(cache=False)
    kw = {"dim_map": ("TENSOR_MODEL_PARALLEL_GROUP=tensor",), "window": "ProfilerStep*", "memory_points": 10}
    plain = analyze(load([run8], options=options, executor="serial", progress=False), **kw)
    mapped = analyze_files([run8], options=options, executor="serial", progress=False, **kw)
    got = mapped.to_dict()
    assert got == plain.to_dict()
    assert {d["dimension"] for d in got["by_dimension"]} >= {"tensor", "dp", "pp"}
    with pytest.raises(TypeError, match="unexpected keyword"):
        analyze_files([run8], options=options, executor="serial", bogus=1)


def test_timeline_draws_a_bounded_selection(run8):
    """Above max_ranks the timeline reads back and draws only the chosen ranks: the reference rank, the straggler
    that made its peers wait longest, the rank that waited longest."""
    mapped = analyze_files([run8], options=LoadOptions(cache=False), executor="serial", progress=False)
    cross = mapped.comm.cross
    doc = build_timeline(mapped.traces, mapped.comm.ranks, cross.offsets, None, cross, max_ranks=3)
    drawn = [r["rank"] for r in doc["ranks"]]
    most_waiting = max(cross.wait_by_rank_ns, key=lambda r: (cross.wait_by_rank_ns[r], -r))
    assert len(drawn) == 3 and {0, cross.stragglers[0].rank, most_waiting} <= set(drawn)
    assert doc["ranks_total"] == 8 and doc["selection"].startswith("3 of 8 ranks drawn")
    assert mapped.traces.tables.reads == 3
