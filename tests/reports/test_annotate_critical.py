"""`tracekit annotate TRACE --critical-path`: the critical path as a track of the annotated copy, in the trace's own
time base: one event per segment named by its kind, adding up to the summary's path, each segment named after an op
lying inside an original event of that name."""

from __future__ import annotations

import collections
import gzip
import json

import pytest
from click.testing import CliRunner

from tests.helpers.data import real_trace
from tracekit.cli import cli

OPTS = ["--no-cache", "--executor", "serial"]


@pytest.mark.parametrize("name", ["allreduce-broadcast-2rank-rank0", "rocm-mi250-minitoy"])
def test_critical_path_track_lines_up_with_the_trace(tmp_path, name):
    src = str(real_trace(name))
    out = tmp_path / "a.json.gz"
    res = CliRunner().invoke(cli, ["annotate", src, *OPTS, "--critical-path", "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["analyze", src, *OPTS, "--critical-path", "--format", "json"])
    steps = json.loads(res.output)["critical_path"]["steps"]
    with gzip.open(out, "rt") as f:
        events = json.load(f)["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    track = [e for e in events if e.get("cat") == "tracekit" and threads.get(e["tid"]) == "critical path"]
    segs = [s for st in steps for s in st["segments"] if s["dur_us"] > 0]
    assert len(track) == len(segs) > 0
    for kind in {s["kind"] for s in segs}:
        assert sum(e["dur"] for e in track if e["name"] == kind) == pytest.approx(
            sum(s["dur_us"] for s in segs if s["kind"] == kind), abs=1e-3 * len(segs)
        )
    assert sorted(e["name"] for e in track) == sorted(s["kind"] for s in segs)
    spans = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") != "tracekit":
            spans[e["name"]].append((e["ts"], e["ts"] + e["dur"]))
    named = [e for e in track if e["args"]["op"] in spans]
    assert len(named) > len(track) // 3
    for e in named:  # on the trace's own clock: inside an event of the op it names
        assert any(s - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= t + 1e-3 for s, t in spans[e["args"]["op"]]), e


def test_without_the_flag_no_critical_path_track(tmp_path):
    out = tmp_path / "a.json"
    res = CliRunner().invoke(cli, ["annotate", str(real_trace("rocm-mi250-minitoy")), *OPTS, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert not [
        e
        for e in json.loads(out.read_text())["traceEvents"]
        if e.get("ph") == "M" and e.get("args", {}).get("name") == "critical path"
    ]
