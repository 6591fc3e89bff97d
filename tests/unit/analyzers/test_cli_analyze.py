from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import cli

TRACE = str(Path(__file__).resolve().parents[2] / "data" / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz")


def test_bad_dim_map_is_a_usage_error():
    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--dim-map", "oops", TRACE])
    assert res.exit_code == 2 and "PATTERN=DIM" in res.output


def test_dim_map_renames_the_dimension_and_timeline_out(tmp_path):
    import json

    res = CliRunner().invoke(
        cli,
        [
            "analyze",
            "--no-cache",
            "--executor",
            "serial",
            "--format",
            "json",
            "--dim-map",
            "default_pg=dp",
            "--timeline-out",
            str(tmp_path / "tl.json"),
            TRACE,
        ],
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert {x["dimension"] for x in d["by_dimension"]} == {"dp"}
    tl = json.loads((tmp_path / "tl.json").read_text())
    assert tl["schema"] == "tracekit.timeline/1.1" and [r["rank"] for r in tl["ranks"]] == [0]


def _steps(res) -> list[dict]:
    import json

    assert res.exit_code == 0, res.output
    return [{k: v for k, v in s.items() if k != "step"} for s in json.loads(res.output)["ranks"][0]["steps"]]


def test_window_over_the_profiler_steps_gives_their_figures():
    """--window assigns events afresh (host events by window, device work by its launch): on the ProfilerStep
    annotations themselves it must give the loader's per-step figures exactly."""
    base = ["analyze", "--no-cache", "--executor", "serial", "--format", "json", TRACE]
    res = CliRunner().invoke(cli, [*base, "--window", "ProfilerStep#*"])
    assert _steps(res) == _steps(CliRunner().invoke(cli, base)) and len(_steps(res)) == 3


def test_window_on_a_trace_without_profiler_steps(tmp_path):

    alexnet = Path(__file__).resolve().parents[2] / "data" / "kineto-gpu-more" / "critical-path-alexnet.json.gz"
    args = ["--no-cache", "--executor", "serial", str(alexnet), "--window", "*|measure|forward]"]
    (step,) = _steps(CliRunner().invoke(cli, ["analyze", "--format", "json", *args]))
    assert step["complete"] and step["host_wall_us"] == 79678.0 and step["compute_us"] > 0
    res = CliRunner().invoke(cli, ["check", args[3], "--window", args[5], "--budget", "wall_us<=100000"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["analyze", *args[:4], "--window", "no-such-annotation"])
    assert res.exit_code == 3 and "no-such-annotation" in res.output
