import xml.etree.ElementTree as ET

from tests.helpers.summaries import tp_run
from tracekit.gate.budgets import parse_budget
from tracekit.gate.compare import GateOptions, run_gate
from tracekit.gate.metrics import RunMetrics
from tracekit.reports.junit import write_junit
from tracekit.reports.markdown import render_markdown


def _report():
    base, now = RunMetrics(tp_run([100.0] * 3), "base.json"), RunMetrics(tp_run([125.0] * 3), "now|run.json")
    return run_gate(now, base, (parse_budget("tp/all_gather:exposed_comm_us<=800"),), GateOptions(min_delta_us=10))


def test_junit_has_one_testcase_per_check_and_failures_with_messages(tmp_path):
    report = _report()
    write_junit(report, tmp_path / "out.xml")
    root = ET.parse(tmp_path / "out.xml").getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(report.checks) == 6
    failed = {c.get("name"): c.find("failure").get("message") for c in cases if c.find("failure") is not None}
    assert failed == {c.name: c.message for c in report.failures}
    assert len(failed) == 3
    assert root.find("testsuite").get("failures") == "3"
    assert "+25.0%" in failed["tp/all_gather:exposed_comm_us"]
    assert {c.get("classname") for c in cases} == {"tracekit.check.regression", "tracekit.check.budget"}


def test_markdown_lists_failures_first_and_every_check_in_a_table():
    report = _report()
    md = render_markdown(report)
    assert md.startswith("## tracekit check ❌ failed\n")
    failures = md.split("### Failures")[1].split("###")[0]
    assert failures.count("\n- ") == 3 and "tp/all_gather exposed_comm_us regressed" in failures
    assert len([line for line in md.splitlines() if line.startswith(("| ✅", "| ❌"))]) == 6
    assert "now\\|run.json" in md  # a pipe in a name cannot break the table
    assert "| <= 800.0 µs |" in md
