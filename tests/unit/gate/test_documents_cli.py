"""The gate's commands on hostile baselines and summaries: exit 3 and one line, never a traceback or a pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.data import gpu_trace
from tests.helpers.summaries import tp_run

pytestmark = pytest.mark.slow  # each case runs the command in a subprocess

TRACE = gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")


def _tracekit(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracekit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "120"},
    )


def _baseline(tmp_path: Path, edit) -> Path:
    data = tp_run([10.0, 12.0, 11.0])
    edit(data)
    p = tmp_path / "baseline.json"
    p.write_text(json.dumps(data))
    return p


CASES = {
    "nan": lambda d: d["ranks"][0]["steps"][0].__setitem__("exposed_comm_us", float("nan")),
    "1e308": lambda d: d["ranks"][0]["steps"][1].__setitem__("wall_us", 1e308),
    "rank abc": lambda d: d["ranks"][0].__setitem__("rank", "abc"),
    "ranks strings": lambda d: d.__setitem__("ranks", ["a", "b"]),
    "layout list": lambda d: d["run"].__setitem__("layout", ["tp"]),
    "no totals": lambda d: d["ranks"][1].pop("totals"),
    "deep": lambda d: d["run"].__setitem__("manifest", json.loads("[" * 900 + "]" * 900)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_and_diff_refuse_a_hostile_baseline(tmp_path, case):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(tp_run([10.0, 12.0, 11.0])))
    bad = _baseline(tmp_path, CASES[case])
    for args in (
        ("check", str(good), "--baseline", str(bad)),
        ("diff", str(bad), str(good)),
        ("report", "--summary", str(bad), "-o", str(tmp_path / "r.html")),
        ("baseline", str(bad), "-o", str(tmp_path / "b.json")),
    ):
        if case == "deep" and args[0] == "report":
            continue  # report reads summaries through the same decoder; one command is enough for the deep case
        res = _tracekit(*args)
        assert "Traceback" not in res.stderr, (args, res.stderr)
        assert res.returncode == (2 if args[0] == "report" else 3), (args, res.returncode, res.stdout, res.stderr)
        lines = [ln for ln in res.stderr.splitlines() if ln.startswith("tracekit: error:")]
        assert len(lines) == 1 and str(bad) in lines[0], res.stderr


def test_a_trace_named_like_a_summary_goes_to_the_loader_once(tmp_path):
    """A plain .json trace without a trace-like name is told apart by its first bytes and analysed."""
    import gzip

    p = tmp_path / "current.json"
    p.write_bytes(gzip.decompress(Path(TRACE).read_bytes()))
    res = _tracekit("check", str(p), "--budget", "overlap_ratio>=0")
    assert res.returncode == 0, res.stderr
    assert "PASSED" in res.stdout


def test_check_baseline_and_diff_take_the_loaders_limits(tmp_path):
    """The same limit options as the analysing commands: a trace (and a summary) past --max-trace-bytes is refused
    in one line, exit 3; under the limit the same commands pass."""
    summary = tmp_path / "s.json"
    summary.write_text(json.dumps(tp_run([10.0, 12.0])))
    for args in (
        ("check", TRACE, "--budget", "overlap_ratio>=0"),
        ("baseline", TRACE, "-o", str(tmp_path / "b.json")),
        ("diff", TRACE, str(summary)),
        ("check", str(summary), "--budget", "overlap_ratio>=0"),
    ):
        res = _tracekit(*args, "--max-trace-bytes", "1000")
        assert res.returncode == 3 and "Traceback" not in res.stderr, (args, res.stderr)
        assert "1,000 bytes" in res.stderr or "1000 bytes" in res.stderr, res.stderr
    assert _tracekit("check", TRACE, "--budget", "overlap_ratio>=0", "--max-trace-bytes", str(10**9)).returncode == 0
