import json
import os

from click.testing import CliRunner

from tracekit.cli import cli

TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "data", "kineto-gpu-more", "cuda-event-sync.json.gz")


def _run(*args):
    return CliRunner().invoke(cli, ["whatif", TRACE, "--no-cache", "--executor", "serial", *args])


def test_json_has_measured_predicted_and_the_replay_error():
    res = _run("--set", "kernel:spin_kernel=3", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    (step,) = doc["steps"]
    assert step["step"] == 100 and step["measured_us"] == 3154.0 and step["predicted_us"] == 3154.0 + 72.0
    assert doc["replay_error"] == 0.0 and doc["specs"] == ["kernel:spin_kernel=3"]
    assert doc["critical_path"]["steps"][0]["length_us"] == 3154.0
    assert doc["predicted_critical_path"]["steps"][0]["length_us"] == 3154.0 + 72.0


def test_table_and_identity():
    res = _run()
    assert res.exit_code == 0, res.output
    assert "no change (identity replay)" in res.output and "replay error of the unchanged graph: 0.000 %" in res.output
    assert "critical path: 1 step: host-bound: 99 % host on rank 0" in res.output


def test_a_bad_spec_is_a_usage_error():
    res = _run("--set", "comm:tp")
    assert res.exit_code == 2 and "expected comm:DIM=F" in res.output


DATA = os.path.join(os.path.dirname(__file__), "..", "..", "data")


def _json(*args):
    res = CliRunner().invoke(cli, [*args, "--no-cache", "--executor", "serial", "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_window_gives_the_steps_the_analysis_gives():
    """--window as on analyze (exact name or glob): each step's measured time equals the analysis' wall_us (the step
    to its device end) of the same --window."""
    for trace, window in (
        ("kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz", "ProfilerStep#*"),
        ("kineto-gpu-more/critical-path-alexnet.json.gz", "*|measure|forward]"),
    ):
        path = os.path.join(DATA, trace)
        got = _json("whatif", path, "--window", window)
        steps = _json("analyze", path, "--window", window)["ranks"][0]["steps"]
        assert [(s["step"], s["measured_us"]) for s in got["steps"]] == [(s["step"], s["wall_us"]) for s in steps]
        assert got["replay_error"] == 0.0 and got["steps"]
    plain = _json("whatif", os.path.join(DATA, "kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz"))
    assert [s["step"] for s in plain["steps"]] == [4, 5, 6]  # ProfilerStep numbers without --window


def test_window_nested_instances_merge_into_the_enclosing_one():
    from tests.helpers.tables import ev, table, traceset
    from tracekit.analyzers.graph.whatif import whatif as run_whatif

    host = dict(stream=1, device=-1)
    ts = traceset(
        {
            0: table(
                [
                    ev("ANNOTATION", 0, 1000, name="fwd", **host),
                    ev("ANNOTATION", 100, 200, name="fwd", **host),
                    ev("ANNOTATION", 2000, 500, name="fwd-2", **host),
                    ev("CPU_OP", 10, 50, name="aten::mm", **host),
                ]
            )
        }
    )
    r = run_whatif(ts, windows="fwd*")
    assert [(s.step, s.measured_ns) for s in r.steps] == [(0, 1000), (1, 500)]


def test_window_that_matches_nothing_is_one_line():
    res = CliRunner().invoke(cli, ["whatif", TRACE, "--no-cache", "--executor", "serial", "--window", "no-such"])
    assert res.exit_code == 3 and "no-such" in res.output and len(res.output.strip().splitlines()) == 1


def test_a_nested_instance_is_a_window_of_its_own():
    """AlexNet's measured forward holds a second instance inside the first: --window merges it (and the warnings
    say so), --instance 1 analyses it alone (its own 36,356 µs, HTA's instance_id 1), out of range is exit 3."""
    path = os.path.join(DATA, "kineto-gpu-more", "critical-path-alexnet.json.gz")
    window = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
    merged = _json("analyze", path, "--window", window)
    assert [(s["step"], s["wall_us"]) for s in merged["ranks"][0]["steps"]] == [(0, 79678.0)]
    assert any("1 instances of" in w and "--instance K" in w for w in merged["warnings"])
    alone = _json("whatif", path, "--window", window, "--instance", "1")
    assert [(s["step"], s["measured_us"]) for s in alone["steps"]] == [(1, 36356.0)]
    assert alone["critical_path"]["steps"][0]["length_us"] == 36356.0
    first = _json("analyze", path, "--window", window, "--instance", "0")
    assert [(s["step"], s["wall_us"]) for s in first["ranks"][0]["steps"]] == [(0, 79678.0)]
    res = CliRunner().invoke(cli, ["analyze", path, "--window", window, "--instance", "2", "--no-cache", "--executor", "serial"])
    assert res.exit_code == 3 and "no instance 2" in res.output
    res = CliRunner().invoke(cli, ["analyze", path, "--instance", "1", "--no-cache"])
    assert res.exit_code == 2
