import pytest

from tests.helpers.summaries import tp_run
from tracekit.errors import ConfigError
from tracekit.gate.budgets import parse_budget, parse_fraction
from tracekit.gate.metrics import RunMetrics, Scope


@pytest.mark.parametrize(
    "expr, scope, metric, op, limit",
    [
        ("exposed_comm_share<=0.15", None, "exposed_comm_share", "<=", 0.15),
        ("overlap_ratio >= 30%", None, "overlap_ratio", ">=", 0.30),
        ("tp/all_gather:exposed_comm_us<=800", Scope("tp", "all_gather"), "exposed_comm_us", "<=", 800.0),
        ("cp:wait_us<2e3", Scope("cp"), "wait_us", "<", 2000.0),
        ("*/*:exposed_comm_us>0", Scope("*", "*"), "exposed_comm_us", ">", 0.0),
    ],
)
def test_parse(expr, scope, metric, op, limit):
    b = parse_budget(expr)
    assert (b.scope, b.metric, b.op) == (scope, metric, op)
    assert b.limit == pytest.approx(limit)


@pytest.mark.parametrize(
    "expr, why",
    [
        ("exposed_comm_share", "no comparison"),
        ("exposed_comm_share==0.1", "operator '==' is not supported"),
        ("exposed_comm_share=0.1", "operator '=' is not supported"),
        ("exposd_comm_share<=0.1", "unknown whole-run metric 'exposd_comm_share'"),
        ("count<=5", "needs a dimension scope"),
        ("tp:wall_us<=5", "unknown dimension/op metric 'wall_us'"),
        ("exposed_comm_share<=abc", "value 'abc' is not a number"),
        ("exposed_comm_us<=10%", "a percentage only fits a ratio metric"),
        ("overlap_ratio>=150%", "is a ratio in 0..1"),
        ("tp/a/b:exposed_comm_us<=1", "bad scope 'tp/a/b'"),
        ("0<exposed_comm_us<=1", "more than one comparison"),
        ("<=1", "no metric before"),
    ],
)
def test_bad_expressions_say_what_is_wrong_in_one_line(expr, why):
    with pytest.raises(ConfigError) as info:
        parse_budget(expr)
    msg = str(info.value)
    assert repr(expr) in msg and why in msg and "\n" not in msg
    assert info.value.exit_code == 2


def test_budget_without_baseline_passes_and_fails_with_numbers():
    s = RunMetrics(tp_run([100.0, 120.0, 110.0], wall_us=1000.0))  # share per step .10 .12 .11 -> .11
    [ok] = parse_budget("exposed_comm_share<=0.15").evaluate(s)
    assert ok.passed and ok.current.median == pytest.approx(0.11)
    [bad] = parse_budget("exposed_comm_share<=10%").evaluate(s)
    assert not bad.passed
    assert bad.message == (
        "budget exposed_comm_share<=10% failed: exposed_comm_share now 0.110 (steps 0.100..0.120), "
        "limit <= 0.100, over by 0.010 (+10.0%)"
    )
    [dim] = parse_budget("tp/all_gather:exposed_comm_us<=100").evaluate(s)
    assert dim.message == (
        "budget tp/all_gather:exposed_comm_us<=100 failed: tp/all_gather:exposed_comm_us now "
        "110.0 µs (steps 100.0..120.0), limit <= 100.0 µs, over by 10.0 µs (+10.0%)"
    )
    [low] = parse_budget("overlap_ratio>=0.9125").evaluate(s)  # 800 µs comm, 110 exposed -> 0.8625
    assert not low.passed and "overlap_ratio now 0.863 (steps 0.850..0.875), limit >= 0.912, under by 0.050" in low.message


def test_wildcard_budget_checks_each_dimension_op():
    s = RunMetrics(tp_run([300.0, 300.0], [50.0, 50.0]))
    results = parse_budget("tp/*:exposed_comm_us<=100").evaluate(s)
    assert [(r.scope, r.passed) for r in results] == [("tp/all_gather", False), ("tp/reduce_scatter", True)]
    assert results[0].name == "tp/*:exposed_comm_us<=100 [tp/all_gather]"


def test_budget_on_an_absent_dimension_fails_and_lists_what_is_there():
    s = RunMetrics(tp_run([1.0]))
    [r] = parse_budget("cp/all_to_all:exposed_comm_us<=10").evaluate(s)
    assert not r.passed
    assert "cp/all_to_all is not in this run (dimension/op present: tp/all_gather, tp/reduce_scatter)" in r.message
    [r] = parse_budget("cp/*:exposed_comm_us<=10").evaluate(s)
    assert not r.passed and "cp/* is not in this run" in r.message


@pytest.mark.parametrize("text, value", [("10%", 0.10), ("0.25", 0.25), ("150%", 1.5), ("0", 0.0)])
def test_parse_fraction(text, value):
    assert parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["10", "-5%", "ten"])
def test_parse_fraction_refuses(text):
    with pytest.raises(ConfigError, match="--max-regression"):
        parse_fraction(text)
