"""`tracekit check --json` feeds `tracekit report --verdict`: the gate's own output renders as the CI verdict."""

import json
from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import cli

BASELINE = Path(__file__).resolve().parents[1] / "baselines" / "tp-sp-cpu-ws2.json"


def test_gate_json_renders_as_the_report_verdict(tmp_path):
    verdict, html = tmp_path / "verdict.json", tmp_path / "r.html"
    r = CliRunner().invoke(
        cli,
        [
            "check",
            str(BASELINE),
            "--baseline",
            str(BASELINE),
            "--metric",
            "overlap_ratio",
            "--budget",
            "overlap_ratio>=0.9",
            "--json",
            str(verdict),
        ],
    )
    assert r.exit_code == 1, r.output  # the budget fails; the regression check against itself passes
    gate = json.loads(verdict.read_text())
    median = gate["checks"][0]["current"]["median"]
    r = CliRunner().invoke(cli, ["report", "--summary", str(BASELINE), "--verdict", str(verdict), "-o", str(html)])
    assert r.exit_code == 0, r.output
    page = html.read_text()
    assert "CI verdict: FAIL" in page and str(BASELINE) in page
    assert f"{100 * median:.1f} %" in page  # the check's current median, formatted as a ratio
    assert "&gt;= 90.0 %" in page  # the budget, escaped
    assert "budget overlap_ratio&gt;=0.9 failed" in page
