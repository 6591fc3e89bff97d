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
    assert "critical path: 1 step: 99 % host on rank 0" in res.output


def test_a_bad_spec_is_a_usage_error():
    res = _run("--set", "comm:tp")
    assert res.exit_code == 2 and "expected comm:DIM=F" in res.output
