"""The tracekit.timeline/1 record and the annotate pieces on a hand-built table whose answers are worked out
by hand (the table of test_overlap: K = [0,70) [150,160) [210,250) [260,280); C = [30,90) [180,230))."""

import pytest
from test_overlap import gpu_rows

from tests.helpers.tables import ev, table
from tracekit.analyzers import analyze
from tracekit.analyzers.comm.overlap import StepOverlap
from tracekit.analyzers.comm.timeline_record import TIMELINE_WRITTEN, representative_steps
from tracekit.model.traceset import RankInfo, RunMetadata, TraceSet

BASE = 1_000_000  # baseTimeNanoseconds: the record is in the trace's own time base (absolute - base)


def shifted(rows, by):
    return [{**r, "ts_ns": r["ts_ns"] + by} for r in rows]


def summary(rows, seed=None):
    t = table(shifted(rows, BASE), shuffle_seed=seed)
    ts = TraceSet({0: t}, {0: RankInfo(rank=0, world_size=1, device_type="cuda", base_time_ns=BASE)}, RunMetadata(world_size=1))
    return analyze(ts)


EXPECTED = {  # step: compute, hidden, exposed pieces inside the step's window [100·step, 100·step + 100) ns
    0: ([(0, 70)], [(30, 70)], [(70, 90)]),
    1: ([(150, 160)], [], [(180, 200)]),
    2: ([(210, 250), (260, 280)], [(210, 230)], [(200, 210)]),
}


def as_ns(intervals, cat):
    return [(round(s * 1e3), round(e * 1e3)) for s, e, c in intervals if c == cat]


@pytest.mark.parametrize("seed", [None, 3])
def test_timeline_is_the_median_step_with_hand_computed_pieces(seed):
    tl = summary(gpu_rows(), seed).timeline()
    assert tl["schema"] == TIMELINE_WRITTEN == "tracekit.timeline/1.1"
    assert tl["clock"] == {"reference_rank": 0, "base_ns": BASE} and "critical_path" not in tl
    (r,) = tl["ranks"]
    assert (r["base_ns"], r["offset_ns"], r["shift_ns"]) == (BASE, 0, 0)  # one rank: its own clock is the common one
    assert r["rank"] == 0 and r["step"] == 1  # walls 100, 100, 100: ties by step, the middle one
    assert r["window_us"] == [0.1, 0.2]
    for cat, want in zip(("compute", "hidden", "exposed"), EXPECTED[1]):
        assert as_ns(r["intervals"], cat) == want, cat
    assert [iv[0] for iv in r["intervals"]] == sorted(iv[0] for iv in r["intervals"])


@pytest.mark.parametrize("step", [0, 2])
def test_other_steps_pieces(step):
    from tracekit.analyzers.comm.timeline_record import step_timeline

    s = summary(gpu_rows())
    r = step_timeline(s.traces.table(0), s.traces.info(0), step).to_dict()
    for cat, want in zip(("compute", "hidden", "exposed"), EXPECTED[step]):
        assert as_ns(r["intervals"], cat) == want, (step, cat)


def test_annotation_pieces_cover_all_steps_and_sum_to_the_totals():
    s = summary(gpu_rows())
    intervals, cols = s.annotation(0)
    assert as_ns(intervals, "hidden") == [(30, 70), (210, 230)]
    assert as_ns(intervals, "exposed") == [(70, 90), (180, 210)]
    tot = s.to_dict()["ranks"][0]["totals"]
    assert sum(e - b for b, e, c in intervals if c == "hidden") == pytest.approx(tot["hidden_comm_us"])
    assert sum(e - b for b, e, c in intervals if c == "exposed") == pytest.approx(tot["exposed_comm_us"])
    assert sorted((round(c["start_us"] * 1e3), round((c["start_us"] + c["dur_us"]) * 1e3)) for c in cols) == [
        (30, 90),
        (60, 80),
        (180, 230),
    ]
    assert {c["dimension"] for c in cols} == {"world"}  # default_pg


def test_timeline_is_not_in_the_json_summary():
    assert "timeline" not in summary(gpu_rows()).to_dict()


def _rank(rank, walls):
    from tracekit.analyzers.comm.instances import Instances
    from tracekit.analyzers.comm.overlap import RankOverlap

    steps = tuple(StepOverlap(s, w, 0, 0, 0, 0, 0, 0, 0, 0) for s, w in walls.items())
    return RankOverlap(rank, "cuda", steps, StepOverlap.total(steps), (), Instances.empty())


def test_one_step_for_all_ranks_by_median_mean_wall():
    ranks = (_rank(0, {0: 100, 1: 300, 2: 200}), _rank(1, {0: 100, 1: 100, 2: 400}))
    assert representative_steps(ranks) == {0: 1, 1: 1}  # means 100, 200, 300


def test_each_rank_its_own_median_without_a_common_step():
    ranks = (_rank(0, {551: 5, 552: 9, 553: 7}), _rank(1, {10: 3, 11: 1}))
    assert representative_steps(ranks) == {0: 553, 1: 10}


def test_a_trace_without_steps_is_one_window():
    rows = [ev("KERNEL", 0, 10), ev("COMM", 5, 10, stream=13, coll_op="all_reduce")]
    (r,) = summary(rows).timeline()["ranks"]
    assert r["step"] == -1 and r["window_us"] == [0.0, 0.015]
    assert [as_ns(r["intervals"], c) for c in ("compute", "hidden", "exposed")] == [[(0, 10)], [(5, 10)], [(10, 15)]]
