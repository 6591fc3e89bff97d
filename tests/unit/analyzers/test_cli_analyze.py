from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import cli

TRACE = str(Path(__file__).resolve().parents[2] / "data" / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz")


def test_bad_dim_map_is_a_usage_error():
    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--dim-map", "oops", TRACE])
    assert res.exit_code == 2 and "PATTERN=DIM" in res.output


def test_dim_map_renames_the_dimension_and_timeline_out(tmp_path):
    import json

    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--format", "json",
                                   "--dim-map", "default_pg=dp", "--timeline-out", str(tmp_path / "tl.json"), TRACE])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert {x["dimension"] for x in d["by_dimension"]} == {"dp"}
    tl = json.loads((tmp_path / "tl.json").read_text())
    assert tl["schema"] == "tracekit.timeline/1" and [r["rank"] for r in tl["ranks"]] == [0]
