import pytest

from tests.helpers.summaries import tp_run
from tracekit.errors import IncomparableRunsError
from tracekit.gate.budgets import parse_budget
from tracekit.gate.compare import GateOptions, MetricSpec, compare, ensure_comparable, run_gate
from tracekit.gate.metrics import RunMetrics, Scope


def _by_name(checks):
    return {c.name: c for c in checks}


def test_known_answer_regression_names_dimension_op_baseline_now_and_change():
    base = RunMetrics(tp_run([95.0, 100.0, 105.0]), "base.json")
    now = RunMetrics(tp_run([120.0, 125.0, 130.0]), "now.json")
    checks = _by_name(compare(base, now, GateOptions(max_regression=0.10, min_delta_us=5.0)))
    ag = checks["tp/all_gather:exposed_comm_us"]
    assert not ag.passed
    assert ag.change == pytest.approx(0.25)
    assert ag.message == (
        "tp/all_gather exposed_comm_us regressed: baseline 100.0 µs (steps 95.0..105.0), "
        "now 125.0 µs (steps 120.0..130.0), +25.0% (allowed +10.0%)"
    )
    assert checks["tp/reduce_scatter:exposed_comm_us"].passed
    assert not checks["exposed_comm_us"].passed  # the whole run moved by the same 25 µs


def test_within_threshold_passes():
    base, now = RunMetrics(tp_run([100.0] * 3)), RunMetrics(tp_run([108.0] * 3))
    assert all(c.passed for c in compare(base, now, GateOptions(min_delta_us=1.0)))


def test_absolute_floor_keeps_tiny_numbers_from_failing():
    base, now = RunMetrics(tp_run([2.0] * 3)), RunMetrics(tp_run([6.0] * 3))  # +200% but only 4 µs
    checks = _by_name(compare(base, now, GateOptions(min_delta_us=50.0)))
    ag = checks["tp/all_gather:exposed_comm_us"]
    assert ag.passed and ag.change == pytest.approx(2.0)
    assert "within the 50.0 µs absolute floor" in ag.message
    assert not _by_name(compare(base, now, GateOptions(min_delta_us=1.0)))["tp/all_gather:exposed_comm_us"].passed


def test_one_noisy_step_is_not_a_regression():
    base = RunMetrics(tp_run([100.0, 101.0, 99.0, 100.0, 102.0]))
    now = RunMetrics(tp_run([100.0, 101.0, 600.0, 100.0, 99.0]))  # one step 6x: the median does not move
    checks = compare(base, now, GateOptions(min_delta_us=1.0))
    assert all(c.passed for c in checks)
    assert "steps 99.0..600.0" in _by_name(checks)["tp/all_gather:exposed_comm_us"].message


def test_lower_overlap_is_a_regression():
    base = RunMetrics(tp_run([100.0] * 3))  # comm 800 -> overlap 0.875
    now = RunMetrics(tp_run([400.0] * 3))  # 0.5
    ov = _by_name(compare(base, now))["overlap_ratio"]
    assert not ov.passed and ov.change == pytest.approx(0.5 / 0.875 - 1)
    assert ov.message.startswith("overlap_ratio (whole run) regressed: baseline 0.875")
    assert "(allowed -10.0%)" in ov.message
    better = _by_name(compare(now, base))["overlap_ratio"]
    assert better.passed


def test_new_exposed_collective_fails_and_a_vanished_one_passes():
    base = RunMetrics(tp_run([100.0] * 3, layout={"tp": 2}))
    d = tp_run([100.0] * 3, layout={"tp": 2})
    for c in d["collectives"][:2]:
        c.update(dimension="cp", op="all_to_all", pg_desc="tracekit:cp", exposed_us=300.0, hidden_us=100.0)
    now = RunMetrics(d)
    checks = _by_name(compare(base, now, GateOptions(metrics=(MetricSpec("exposed_comm_us", Scope("*", "*")),))))
    new = checks["cp/all_to_all:exposed_comm_us"]
    # only rank 0 step 1 has it: medians per rank 0 and 0 -> 0, so no failure; the median guards noise here too
    assert new.passed
    for c in d["collectives"]:
        if c["op"] == "all_gather":
            c.update(dimension="cp", op="all_to_all", exposed_us=300.0)
    checks = _by_name(compare(base, RunMetrics(d), GateOptions(metrics=(MetricSpec("exposed_comm_us", Scope("*", "*")),))))
    assert not checks["cp/all_to_all:exposed_comm_us"].passed
    assert "baseline absent, now 300.0 µs" in checks["cp/all_to_all:exposed_comm_us"].message
    assert checks["tp/all_gather:exposed_comm_us"].passed
    assert "no value in this run" in checks["tp/all_gather:exposed_comm_us"].message


@pytest.mark.parametrize(
    "change, why",
    [
        (dict(layout={"tp": 4}), "layout differs (baseline tp=2, this run tp=4)"),
        (dict(world_size=4), "world size differs (baseline 2, this run 4)"),
        (dict(workload="tp-cp"), "workload differs (baseline tp-sp, this run tp-cp)"),
        (dict(device_type="cuda"), "device type differs (baseline cpu, this run cuda)"),
    ],
)
def test_refuses_unlike_runs(change, why):
    base = RunMetrics(tp_run([1.0]), "base.json")
    now = RunMetrics(tp_run([1.0], **change), "now.json")
    with pytest.raises(IncomparableRunsError) as info:
        run_gate(now, base)
    assert why in str(info.value) and "cannot compare now.json with baseline base.json" in str(info.value)
    assert info.value.exit_code == 3


def test_unrecorded_identity_is_a_note_not_a_refusal():
    notes = ensure_comparable(RunMetrics(tp_run([1.0])), RunMetrics(tp_run([1.0], workload=None)))
    assert notes == ["workload is not recorded in this run; compared anyway"]


def test_run_gate_combines_regressions_and_budgets():
    base, now = RunMetrics(tp_run([100.0] * 3)), RunMetrics(tp_run([125.0] * 3))
    report = run_gate(now, base, (parse_budget("exposed_comm_share<=0.2"),), GateOptions(min_delta_us=10))
    assert not report.passed
    # exposed 100 -> 125 µs of 1000 per step: share 0.100 -> 0.125 (+25%, +0.025 > the 0.02 floor); overlap
    # 0.875 -> 0.84375 is -3.6%, inside 10%; the budget holds (0.125 <= 0.2)
    assert {c.name for c in report.failures} == {"exposed_comm_us", "exposed_comm_share", "tp/all_gather:exposed_comm_us"}
    assert report.headline() == "tracekit check: FAILED: 3 of 6 checks passed, 3 failed"
    alone = run_gate(now, None, (parse_budget("exposed_comm_share<=0.25"),))
    assert alone.passed and len(alone.checks) == 1


def test_exposure_appearing_where_the_baseline_had_none():
    base, now = RunMetrics(tp_run([100.0] * 3, [0.0] * 3)), RunMetrics(tp_run([100.0] * 3, [80.0] * 3))
    rs = _by_name(compare(base, now))["tp/reduce_scatter:exposed_comm_us"]
    assert not rs.passed and rs.change is None
    assert rs.message == (
        "tp/reduce_scatter exposed_comm_us regressed: baseline 0.0 µs (steps 0.0..0.0), "
        "now 80.0 µs (steps 80.0..80.0), up from 0 (allowed +10.0%)"
    )
