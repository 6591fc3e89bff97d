"""Every command on a folder of Flight Recorder dumps (either form) gives a result or one clean error line with
its exit code, never a traceback."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.helpers.data import DATA
from tracekit.cli import cli

FOLDER = DATA / "flight-recorder" / "gloo-skip"
COMMANDS = [
    (["info"], 3),
    (["report", "-o", "{tmp}/r.html"], 3),
    (["annotate", "-o", "{tmp}/a.json.gz"], 3),
    (["baseline", "-o", "{tmp}/b.json"], 3),
    (["check", "--budget", "overlap_ratio>=0.1"], 3),
    (["whatif", "--set", "comm:dp=0"], 3),
    (["analyze"], 0),
    (["analyze", "--format", "json"], 0),
    (["analyze", "--format", "markdown"], 0),
    (["hang"], 1),
    (["memory", "timeline"], 2),
]


@pytest.mark.parametrize("form", ["pickle", "json"])
@pytest.mark.parametrize("args, code", COMMANDS, ids=lambda a: " ".join(a) if isinstance(a, list) else str(a))
def test_a_folder_of_dumps_gives_a_result_or_one_error_line(tmp_path, form, args, code):
    folder = FOLDER if form == "pickle" else FOLDER / "json"
    res = CliRunner().invoke(cli, [a.format(tmp=tmp_path) for a in args] + [str(folder)])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output
    if code in (2, 3):
        assert res.output.strip().count("\n") <= 3 and "error" in res.output.lower()  # click's usage block is 3 lines


def test_diff_of_two_folders_of_dumps_is_one_line():
    res = CliRunner().invoke(cli, ["diff", str(FOLDER), str(FOLDER / "json")])
    assert res.exit_code == 3 and res.output.count("\n") == 1


def test_kineto_traces_named_like_dumps_stay_kineto_traces(tmp_path):
    """``rank0.json.gz`` has a dump's name (a prefix and a rank), not its content: analyze reads it as a trace."""
    import json
    import shutil

    from tests.helpers.data import gpu_trace

    shutil.copy(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), tmp_path / "rank0.json.gz")
    res = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--format", "json", "--no-cache", "--executor", "serial"])
    assert res.exit_code == 0 and json.loads(res.output)["schema"] == "tracekit.summary/1"
