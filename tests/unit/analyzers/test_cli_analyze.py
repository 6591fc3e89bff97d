import json
from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import cli

TRACE = str(Path(__file__).resolve().parents[2] / "data" / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz")


def test_json_and_table_show_the_same_numbers(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--format", "json", TRACE])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    tot = d["ranks"][0]["totals"]
    assert d["schema"] == "tracekit.summary/1" and tot["comm_us"] > 0
    out = tmp_path / "t.txt"
    res = runner.invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--out", str(out), TRACE])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert f"{tot['comm_us']:,.1f}" in text and f"{100 * tot['overlap_ratio']:.1f}%" in text
    assert "broadcast" in text and "all_reduce" in text


def test_bad_dim_map_is_a_usage_error():
    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--dim-map", "oops", TRACE])
    assert res.exit_code == 2 and "PATTERN=DIM" in res.output
