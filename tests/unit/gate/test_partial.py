"""The gate and partial data: incomplete steps count in no metric, no data never passes, a truncated run fails
unless --allow-partial, and every warning of the load and the analysis is shown (and fails with --strict)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tests.helpers.summaries import coll, step_row, summary, tp_run
from tracekit import gate
from tracekit.cli import cli


def _partial_run() -> dict:
    """Two ranks, steps 1-3; step 3 of rank 0 is incomplete and would dominate every figure."""
    s = tp_run([100.0, 120.0, 110.0])
    bad = s["ranks"][0]["steps"][2]
    bad.update(exposed_comm_us=5000.0, wall_us=6000.0, complete=False, partial_reason="the trace was cut")
    for c in s["collectives"]:
        if c["rank"] == 0 and c["step"] == 3:
            c["exposed_us"] = 2500.0
    return s


def test_incomplete_steps_count_in_no_metric():
    s = gate.RunMetrics(_partial_run())
    whole = gate.RunMetrics(tp_run([100.0, 120.0, 110.0]))
    assert s.stat("exposed_comm_us").samples == whole.stat("exposed_comm_us").samples - 1
    assert s.stat("exposed_comm_us").hi == 120.0  # the 5000 µs of the incomplete step is nowhere
    assert s.stat("exposed_comm_us", gate.Scope("tp", "all_gather")).hi == 120.0
    assert s.steps_left_out == 1 and s.partial_reasons() == ["rank 0 step 3: the trace was cut"]
    report = gate.run_gate(s, budgets=(gate.parse_budget("exposed_comm_us<=200"),))
    assert report.passed
    assert any("1 incomplete steps of this run left out of every metric" in n for n in report.notes)


def test_no_complete_step_fails_even_a_budget_that_zeros_would_pass():
    s = summary({0: [step_row(1, complete=False, partial_reason="no device activity (lost at the truncation)")]})
    report = gate.run_gate(gate.RunMetrics(s, "cut.json"), budgets=(gate.parse_budget("exposed_comm_us<=100"),))
    assert not report.passed
    data = [c for c in report.checks if c.kind == "data"]
    assert len(data) == 1 and "run cut.json has no complete step (rank 0 step 1: no device activity" in data[0].message
    empty = summary({0: []})  # an empty trace: no steps, zero totals
    assert not gate.run_gate(gate.RunMetrics(empty), budgets=(gate.parse_budget("exposed_comm_us<=100"),)).passed


def test_a_baseline_without_complete_steps_fails_the_gate():
    base = summary({0: [step_row(1, complete=False, partial_reason="x")], 1: [step_row(1, complete=False)]})
    report = gate.run_gate(gate.RunMetrics(tp_run([1.0])), gate.RunMetrics(base, "b.json"))
    assert any(c.kind == "data" and c.name == "baseline has complete steps" and not c.passed for c in report.checks)


def test_a_truncated_run_fails_unless_partial_is_allowed():
    data = _partial_run()
    data["ranks"][0]["truncated"] = True
    s = gate.RunMetrics(data, "run")
    failed = gate.run_gate(s, budgets=(gate.parse_budget("exposed_comm_us<=200"),))
    (c,) = failed.failures
    assert c.kind == "data" and "ranks [0] are truncated (1 steps incomplete)" in c.message
    assert "--allow-partial" in c.message
    assert gate.run_gate(s, budgets=(gate.parse_budget("exposed_comm_us<=200"),), allow_partial=True).passed


def test_warnings_are_carried_everywhere_and_strict_fails_on_them(tmp_path):
    data = tp_run([100.0])
    data["warnings"] = ["rank 0: 3 device events have no launch record in the trace", "a & <b>"]
    s = gate.RunMetrics(data)
    report = gate.run_gate(s, budgets=(gate.parse_budget("exposed_comm_us<=200"),))
    assert report.passed and report.warnings == tuple(data["warnings"])
    assert report.to_dict()["warnings"] == data["warnings"]
    gate.write_junit(report, tmp_path / "g.xml")
    xml = (tmp_path / "g.xml").read_text()
    assert "warning: rank 0: 3 device events" in xml and 'name="warnings" value="2"' in xml and "a &amp; &lt;b&gt;" in xml
    assert "### Warnings" in gate.render_markdown(report) and "no launch record" in gate.render_markdown(report)
    strict = gate.run_gate(s, budgets=(gate.parse_budget("exposed_comm_us<=200"),), strict=True)
    (c,) = strict.failures
    assert c.kind == "strict" and "2 warnings" in c.message
    clean = tp_run([100.0])
    assert gate.run_gate(gate.RunMetrics(clean), budgets=(gate.parse_budget("exposed_comm_us<=200"),), strict=True).passed


def test_cli_check_prints_the_warnings_and_strict_fails(tmp_path):
    data = tp_run([100.0])
    data["warnings"] = ["rank 0: dropped 1 device events that start more than 1 s after the last step"]
    run = tmp_path / "run.json"
    run.write_text(json.dumps(data))
    res = CliRunner().invoke(cli, ["check", str(run), "--budget", "exposed_comm_us<=200", "--json", str(tmp_path / "v.json")])
    assert res.exit_code == 0, res.output
    assert "warning: rank 0: dropped 1 device events" in res.output
    assert json.loads((tmp_path / "v.json").read_text())["warnings"] == data["warnings"]
    res = CliRunner().invoke(cli, ["check", str(run), "--budget", "exposed_comm_us<=200", "--strict"])
    assert res.exit_code == 1 and "--strict" in res.output


def test_cli_on_an_empty_trace(tmp_path):
    """Before: exit 0 with a synthetic step 0 of zeros, and the budget passed on no data."""
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    res = CliRunner().invoke(cli, ["analyze", str(empty), "--no-cache"])
    assert res.exit_code == 3 and "no step and no events" in res.output
    res = CliRunner().invoke(cli, ["report", str(empty), "--no-cache", "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 3
    res = CliRunner().invoke(cli, ["check", str(empty), "--budget", "exposed_comm_us<=100"])
    assert res.exit_code == 1 and "has no complete step" in res.output
    res = CliRunner().invoke(cli, ["baseline", str(empty), "-o", str(tmp_path / "b.json")])
    assert res.exit_code == 3 and not (tmp_path / "b.json").exists()


def test_collectives_of_incomplete_steps_count_in_no_dimension_metric():
    s = summary(
        {0: [step_row(1), step_row(2, complete=False, partial_reason="x")]},
        [coll(0, 1, "tp", "all_gather", 100.0, 10.0), coll(0, 2, "tp", "all_gather", 100.0, 90.0)],
    )
    stat = gate.RunMetrics(s).stat("exposed_comm_us", gate.Scope("tp", "all_gather"))
    assert (stat.median, stat.samples) == (10.0, 1)
