import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from tests.helpers.summaries import tp_run
from tracekit.cli import cli


@pytest.fixture
def runs(tmp_path):
    paths = {}
    for name, ag in (("base", [95.0, 100.0, 105.0]), ("same", [98.0, 102.0, 101.0]), ("worse", [120.0, 125.0, 130.0])):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(tp_run(ag)))
    paths["tp4"] = tmp_path / "tp4.json"
    paths["tp4"].write_text(json.dumps(tp_run([100.0], ranks=4)))
    return paths


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_check_passes_against_its_baseline(runs):
    r = _run("check", runs["same"], "--baseline", runs["base"], "--min-delta-us", "1")
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == "tracekit check: PASSED: 5 of 5 checks passed"


def test_check_fails_with_the_one_line_explanation(runs, tmp_path):
    r = _run(
        "check",
        runs["worse"],
        "--baseline",
        runs["base"],
        "--max-regression",
        "10%",
        "--min-delta-us",
        "5",
        "--junit",
        tmp_path / "j.xml",
        "--markdown",
        tmp_path / "s.md",
    )
    assert r.exit_code == 1
    assert (
        "FAIL  tp/all_gather exposed_comm_us regressed: baseline 100.0 µs (steps 95.0..105.0), "
        "now 125.0 µs (steps 120.0..130.0), +25.0% (allowed +10.0%)"
    ) in r.output.splitlines()
    assert len(ET.parse(tmp_path / "j.xml").getroot().findall(".//testcase")) == 5
    assert "❌ failed" in (tmp_path / "s.md").read_text()


def test_looser_threshold_or_a_metric_choice_passes(runs):
    assert _run("check", runs["worse"], "--baseline", runs["base"], "--max-regression", "30%").exit_code == 0
    r = _run("check", runs["worse"], "--baseline", runs["base"], "--metric", "overlap_ratio", "-q")
    assert r.exit_code == 0 and r.output.strip() == "tracekit check: PASSED: 1 of 1 checks passed"


def test_budgets_work_without_a_baseline(runs):
    ok = _run("check", runs["worse"], "--budget", "exposed_comm_share<=0.15", "--budget", "tp/all_gather:exposed_comm_us<=800")
    assert ok.exit_code == 0, ok.output
    bad = _run("check", runs["worse"], "--budget", "tp/all_gather:exposed_comm_us<=100")
    assert bad.exit_code == 1
    assert "over by 25.0 µs (+25.0%)" in bad.output


@pytest.mark.parametrize(
    "args, code, text",
    [
        ([], 2, "nothing to check"),
        (["--budget", "exposed_comm_share<<0.1"], 2, "budget 'exposed_comm_share<<0.1'"),
        (["--budget", "exposed_comm_us<=1", "--max-regression", "10"], 2, "ambiguous; write 10% for a percentage or 0.10"),
        (["--budget", "exposed_comm_us<=1", "--metric", "bogus"], 2, "--metric 'bogus': unknown whole-run metric 'bogus'"),
        (["--budget", "exposed_comm_us<=1", "--min-delta-us", "-1"], 2, "must be >= 0"),
        (["--bogus-option"], 2, "No such option"),
    ],
)
def test_usage_errors_exit_2(runs, args, code, text):
    r = CliRunner().invoke(cli, ["check", str(runs["base"]), *args])
    assert r.exit_code == code
    assert text in r.output


def test_bad_input_exits_3(runs, tmp_path):
    r = _run("check", tmp_path / "missing.json", "--budget", "exposed_comm_us<=1")
    assert r.exit_code == 3 and "missing.json: no such file or directory" in r.output
    (tmp_path / "not.json").write_text('{"schema": "something/else", "ranks": []}')
    r = _run("check", runs["base"], "--baseline", tmp_path / "not.json")
    assert r.exit_code == 3 and "schema is 'something/else'" in r.output
    (tmp_path / "broken.json").write_text("{")
    assert _run("check", tmp_path / "broken.json", "--budget", "exposed_comm_us<=1").exit_code == 3


def test_refuses_to_compare_different_layouts(runs):
    r = _run("check", runs["tp4"], "--baseline", runs["base"])
    assert r.exit_code == 3
    assert "layout differs (baseline tp=2, this run tp=4)" in r.output
    assert "world size differs (baseline 2, this run 4)" in r.output
    assert "Traceback" not in r.output


def test_baseline_round_trip(runs, tmp_path):
    out = tmp_path / "ci" / "baseline.json"
    r = _run("baseline", runs["base"], "-o", out)
    assert r.exit_code == 0 and "world_size 2, layout {'tp': 2}, workload tp-sp" in r.output
    assert json.loads(out.read_text()) == json.loads(runs["base"].read_text())
    assert _run("check", runs["base"], "--baseline", out).exit_code == 0
    assert _run("baseline", runs["base"]).exit_code == 2  # -o is required


def test_diff_text_and_json(runs):
    r = _run("diff", runs["base"], runs["worse"])
    assert r.exit_code == 0
    assert "tp/all_gather" in r.output and "why: less overlap (0.75→0.69): +25.0 µs" in r.output
    data = json.loads(_run("diff", runs["base"], runs["worse"], "--format", "json").output)
    rows = {row["label"]: row for row in data["by_dimension"]}
    assert rows["tp/all_gather"]["exposed_delta_us"] == 25.0
