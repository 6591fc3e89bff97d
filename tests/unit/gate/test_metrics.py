import pytest

from tests.helpers.summaries import coll, step_row, summary, tp_run
from tracekit.errors import SummaryFormatError
from tracekit.gate.metrics import RunMetrics, Scope


def test_rejects_other_documents():
    with pytest.raises(SummaryFormatError, match=r"x.json: schema is 'other/2', expected 'tracekit.summary/1'"):
        RunMetrics({"schema": "other/2", "ranks": []}, "x.json")
    with pytest.raises(SummaryFormatError, match="y.json: Object missing required field `ranks`"):
        RunMetrics({"schema": "tracekit.summary/1"}, "y.json")
    # a hand-built dict is validated by the same Struct as a file: a string rank is one line naming the field
    with pytest.raises(SummaryFormatError, match=r"z.json: .*\$\.ranks\[0\]\.rank"):
        RunMetrics({**tp_run([1.0]), "ranks": [{**tp_run([1.0])["ranks"][0], "rank": "abc"}]}, "z.json")


def test_run_metrics_are_median_over_steps_then_ranks():
    s = RunMetrics(
        summary(
            {
                0: [step_row(1, 1000, 400, 100), step_row(2, 1000, 400, 300), step_row(3, 2000, 400, 200)],
                1: [step_row(1, 1000, 400, 400), step_row(2, 1000, 400, 400), step_row(3, 1000, 400, 400)],
            }
        )
    )
    # rank 0: exposed median 200, rank 1: 400 -> 300
    assert s.stat("exposed_comm_us").median == 300.0
    # share per step: rank 0 0.1, 0.3, 0.1 -> 0.1; rank 1: 0.4 -> median of (0.1, 0.4) = 0.25
    share = s.stat("exposed_comm_share")
    assert share.median == pytest.approx(0.25)
    assert (share.lo, share.hi) == (pytest.approx(0.1), pytest.approx(0.4))
    # overlap ratio per step: rank 0: .75, .25, .5 -> .5 ; rank 1: 0 -> 0.25
    assert s.stat("overlap_ratio").median == pytest.approx(0.25)


def test_rank_without_steps_uses_its_totals():
    d = summary({0: [step_row(1, 1000, 400, 100)]})
    d["ranks"][0]["steps"] = []
    st = RunMetrics(d).stat("exposed_comm_us")
    assert (st.median, st.basis) == (100.0, "run total")


def test_dimension_metrics_sum_a_steps_collectives():
    colls = [
        coll(0, 1, "tp", "all_gather", 100, 30, bytes=10, busbw_gbps=2.0),
        coll(0, 1, "tp", "all_gather", 100, 10, bytes=10, busbw_gbps=4.0),
        coll(0, 2, "tp", "all_gather", 100, 50, bytes=10, busbw_gbps=3.0),
        coll(0, 3, "cp", "all_to_all", 100, 0),
    ]  # step 3 has no all_gather: counts as 0
    s = RunMetrics(summary({0: [step_row(i, 1000) for i in (1, 2, 3)]}, colls))
    scope = Scope("tp", "all_gather")
    assert s.stat("exposed_comm_us", scope).median == 40.0  # steps: 40, 50, 0
    assert s.stat("count", scope).median == 1.0  # 2, 1, 0
    assert s.stat("bytes", scope).median == 10.0  # 20, 10, 0
    assert s.stat("busbw_gbps", scope).median == 3.0  # step medians 3, 3; step 3 has none
    assert s.stat("overlap_ratio", scope).median == pytest.approx(0.65)  # 160/200=.8, 50/100=.5, none
    assert s.stat("exposed_comm_share", scope).median == pytest.approx(0.04)  # .04 .05 0
    assert s.stat("exposed_comm_us", Scope("tp")).median == 40.0
    assert s.stat("exposed_comm_us", Scope("dp", "all_reduce")) is None
    assert [x.label for x in s.scopes()] == ["cp/all_to_all", "tp/all_gather"]


def test_wait_is_unavailable_when_the_summary_has_only_nulls():
    data = summary({0: [step_row(1)]}, [coll(0, 1, "tp", "all_gather", 100, 30, wait_us=None)])
    data["collectives"][0]["transfer_us"] = None
    s = RunMetrics(data)
    assert s.stat("wait_us", Scope("tp", "all_gather")) is None
    assert s.stat("transfer_us", Scope("tp", "all_gather")) is None
    assert s.stat("comm_us", Scope("tp", "all_gather")).median == 100.0


def test_without_collectives_dimension_metrics_are_run_totals():
    bd = [
        {
            "dimension": "tp",
            "op": "all_gather",
            "count": 8,
            "bytes": 64,
            "comm_us": 800.0,
            "hidden_comm_us": 600.0,
            "exposed_comm_us": 200.0,
            "wait_us": None,
            "transfer_us": None,
            "busbw_gbps": 1.5,
        },
        {
            "dimension": "tp",
            "op": "reduce_scatter",
            "count": 8,
            "bytes": 64,
            "comm_us": 200.0,
            "hidden_comm_us": 200.0,
            "exposed_comm_us": 0.0,
            "wait_us": None,
            "transfer_us": None,
            "busbw_gbps": 1.0,
        },
    ]
    s = RunMetrics(summary({0: [step_row(1)]}, by_dimension=bd))
    st = s.stat("exposed_comm_us", Scope("tp", "all_gather"))
    assert (st.median, st.basis) == (200.0, "run total")
    assert s.stat("overlap_ratio", Scope("tp")).median == pytest.approx(0.8)
    assert s.stat("wait_us", Scope("tp")) is None
    assert s.stat("busbw_gbps", Scope("tp")) is None  # no single figure for two ops


def test_identity_drops_unit_dimensions():
    a = RunMetrics(tp_run([0.0], layout={"tp": 2, "dp": 1}))
    assert a.identity() == {"world_size": 2, "layout": {"tp": 2}, "workload": "tp-sp", "device_type": "cpu"}


def test_scope_patterns_expand_to_what_is_present():
    present = [Scope("cp", "all_to_all"), Scope("tp", "all_gather"), Scope("tp", "reduce_scatter")]
    assert Scope("*", "*").expand(present) == present
    assert Scope("tp", "*").expand(present) == present[1:]
    assert Scope("*").expand(present) == [Scope("cp"), Scope("tp")]
    assert Scope("tp", "all_gather").expand([]) == [Scope("tp", "all_gather")]
    assert Scope("dp", "*").expand(present) == []
