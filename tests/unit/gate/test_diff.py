import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.summaries import tp_run
from tracekit.gate.diff import diff, explain
from tracekit.gate.metrics import RunMetrics
from tracekit.reports.diff_text import render_text


def _side(comm, exposed, wait=None, transfer=None, bytes=1000):
    return {"comm_us": comm, "exposed_comm_us": exposed, "wait_us": wait, "transfer_us": transfer, "bytes": bytes}


def test_less_overlap_explains_all_of_it():
    row = explain("tp/all_gather", _side(100, 20, 10, 90), _side(100, 60, 10, 90))
    assert row.exposed_delta_us == 40.0
    assert (row.less_overlap_us, row.more_comm_us) == (pytest.approx(40.0), pytest.approx(0.0))
    assert row.reasons == ("less overlap (0.80→0.40): +40.0 µs",)


def test_more_waiting_at_the_same_overlap():
    # overlap stays 0.8; comm grows by 50 µs, all of it waiting for a late peer: exposed +50 * 0.2 = +10
    row = explain("cp/all_to_all", _side(100, 20, 10, 90), _side(150, 30, 60, 90))
    assert (row.more_comm_us, row.less_overlap_us) == (pytest.approx(10.0), pytest.approx(0.0))
    assert row.reasons == ("more waiting for peers (wait 10.0→60.0 µs): +10.0 µs",)


def test_more_bytes_means_a_longer_transfer():
    row = explain("tp/reduce_scatter", _side(100, 50, 0, 100, bytes=1000), _side(200, 100, 0, 200, bytes=2000))
    assert row.reasons == ("longer transfer (bytes 1000→2000, +100%): +50.0 µs",)


def test_without_wait_figures_it_says_more_communication_time():
    row = explain("tp/all_gather", _side(100, 50, bytes=10), _side(140, 70, bytes=10))
    assert row.reasons == ("more communication time: +20.0 µs",)


@given(st.floats(1, 1e4), st.floats(0, 1), st.floats(0, 1e4), st.floats(0, 1))
def test_the_two_parts_add_up_to_the_change_in_exposed(ca, fa, cb, fb):
    row = explain("x", _side(ca, ca * fa), _side(cb, cb * fb))
    assert row.more_comm_us + row.less_overlap_us == pytest.approx(row.exposed_delta_us, abs=1e-6)


def test_diff_of_two_runs_per_dimension_and_call_site():
    a = RunMetrics(tp_run([100.0] * 3, [20.0] * 3), "a.json")
    b = RunMetrics(tp_run([100.0] * 3, [220.0] * 3), "b.json")
    result = diff(a, b)
    rows = {r.label: r for r in result.by_dimension}
    assert rows["tp/reduce_scatter"].exposed_delta_us == 200.0
    assert rows["tp/reduce_scatter"].reasons == ("less overlap (0.95→0.45): +200.0 µs",)
    assert rows["tp/all_gather"].exposed_delta_us == 0.0 and rows["tp/all_gather"].reasons == ()
    assert rows["whole run"].exposed_delta_us == 200.0
    top = result.by_call_site[0]
    assert top.label == "tp/reduce_scatter#0 (tracekit:tp)" and top.exposed_delta_us == 200.0
    text = render_text(result)
    assert "why: less overlap (0.95→0.45): +200.0 µs" in text
    assert result.to_dict()["schema"] == "tracekit.diff/1"


def test_an_improved_row_names_what_made_it_better():
    # exposed 60 -> 20 µs at the same comm: overlap 0.40 -> 0.80 takes 100·0.4 = 40 µs; wait 50 -> 10 µs would take
    # (10 − 50)·(1 − 0.4) = 24 µs; half the bytes
    row = explain(
        "x",
        {"comm_us": 100.0, "exposed_comm_us": 60.0, "wait_us": 50.0, "transfer_us": 40.0, "bytes": 2000},
        {"comm_us": 100.0, "exposed_comm_us": 20.0, "wait_us": 10.0, "transfer_us": 40.0, "bytes": 1000},
    )
    assert row.exposed_delta_us == -40.0
    assert row.reasons == (
        "more overlap (0.40→0.80): −40.0 µs",
        "less waiting for peers (wait 50.0→10.0 µs): −24.0 µs",
        "fewer bytes (bytes 2000→1000, -50%)",
    )
    row = explain("x", {"comm_us": 200.0, "exposed_comm_us": 100.0}, {"comm_us": 100.0, "exposed_comm_us": 50.0})
    assert row.reasons == ("less communication time: −50.0 µs",)  # (100 − 200)·(1 − 0.5)
