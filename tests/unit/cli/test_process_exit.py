"""The console script ends without the interpreter's teardown (runtime.process.fast_exit): every output is whole, the standard
streams are flushed, the exit status is the command's, and atexit handlers still run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.data import gpu_trace

pytestmark = pytest.mark.slow  # each case runs the console script in a subprocess

TRACE = str(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"))


def _tracekit(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracekit", *args], capture_output=True, text=True, timeout=300, **kw)


def test_outputs_and_stdout_are_whole_and_the_status_is_the_commands(tmp_path):
    out = tmp_path / "summary.json"
    res = _tracekit("analyze", TRACE, "--format", "json", "--no-cache", "--out", str(out))
    assert res.returncode == 0, res.stderr
    summary = json.loads(out.read_text())  # the whole document
    piped = _tracekit("analyze", TRACE, "--format", "json", "--no-cache")
    assert piped.returncode == 0 and json.loads(piped.stdout) == summary  # stdout flushed to its last byte
    verdict = tmp_path / "verdict.json"
    res = _tracekit("check", str(out), "--budget", "exposed_comm_us<=0", "--json", str(verdict))
    assert res.returncode == 1  # the gate failed: its status, not 0
    assert json.loads(verdict.read_text())["passed"] is False
    assert _tracekit("analyze", str(tmp_path / "missing.json")).returncode not in (0, 1)


def test_atexit_handlers_still_run(tmp_path):
    """A handler registered during the command (as a library would) runs before the process ends."""
    flag = tmp_path / "ran"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(flag)!r}, 'w').write('yes'))\n"
        "sys.argv = ['tracekit', '--help']\n"
        "from tracekit.cli import main\n"
        "main()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "Usage" in res.stdout
    assert flag.read_text() == "yes"


def test_a_profiled_command_ends_the_normal_way_and_its_profile_is_written(tmp_path):
    """``python -m cProfile -o FILE -m tracekit ...`` writes FILE after the command returns: no fast exit there."""
    prof = tmp_path / "run.prof"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            str(prof),
            "-m",
            "tracekit",
            "analyze",
            TRACE,
            "--format",
            "json",
            "--no-cache",
            "--out",
            str(tmp_path / "s.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert prof.stat().st_size > 0
