"""The annotated trace: valid JSON, distinct tracks with metadata, durations equal to the inputs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracekit.errors import TraceFormatError
from tracekit.reports.perfetto import annotate_trace, read_trace, tracks_from_intervals, write_trace

TRACES = Path(__file__).resolve().parents[2] / "tests" / "data" / "kineto-gpu"


def hand_trace() -> dict:
    return {
        "schemaVersion": 1,
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        "traceEvents": [
            {"ph": "X", "name": "gemm", "pid": 0, "tid": 7, "ts": 100.0, "dur": 50.0, "cat": "kernel"},
            {"ph": "X", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 20, "ts": 120.0, "dur": 80.0, "cat": "kernel"},
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        ],
    }


TRACKS = {
    "exposed comm": [[150.0, 200.0]],
    "hidden comm": [[120.0, 150.0]],
    "comm tp": [[120.0, 200.0], [130.0, 140.0], [300.5, 310.25]],
}


def test_tracks_are_threads_of_a_new_process(tmp_path):
    out = write_trace(annotate_trace(hand_trace(), TRACKS), tmp_path / "a.json.gz")
    with gzip.open(out, "rt") as f:
        trace = json.load(f)
    assert trace["baseTimeNanoseconds"] == 1_700_000_000_000_000_000
    assert trace["traceEvents"][:3] == hand_trace()["traceEvents"]
    new = trace["traceEvents"][3:]
    pids = {e["pid"] for e in new}
    assert len(pids) == 1 and pids.isdisjoint({0})
    threads = {e["tid"]: e["args"]["name"] for e in new if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sorted(threads.values()) == ["comm tp", "comm tp #2", "exposed comm", "hidden comm"]
    assert [e["args"]["name"] for e in new if e["name"] == "process_name"] == ["tracekit"]
    for name, ivs in TRACKS.items():
        got = sum(e["dur"] for e in new if e["ph"] == "X" and e["name"] == name)
        assert got == pytest.approx(sum(e - s for s, e in ivs))
    for tid in threads:  # no lane overlaps itself
        xs = sorted((e["ts"], e["ts"] + e["dur"]) for e in new if e["ph"] == "X" and e["tid"] == tid)
        assert all(a[1] <= b[0] for a, b in zip(xs, xs[1:]))


def test_real_trace_round_trip(tmp_path):
    src = TRACES / "allreduce-broadcast-2rank-rank0.json.gz"
    trace = read_trace(src)
    n = len(trace["traceEvents"])
    comm = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "ncclKernel" in str(e.get("name"))]
    tracks = {"comm unknown": [[e["ts"], e["ts"] + e["dur"]] for e in comm]}
    out = write_trace(annotate_trace(trace, tracks), tmp_path / "a.json")
    back = json.loads(out.read_text())
    assert len(back["traceEvents"]) > n + len(comm)
    added = [e for e in back["traceEvents"][n:] if e["ph"] == "X"]
    assert sum(e["dur"] for e in added) == pytest.approx(sum(e["dur"] for e in comm))


def test_tracks_from_intervals_and_bad_input(tmp_path):
    t = tracks_from_intervals(
        [[0, 1, "compute"], [1, 3, "exposed"], [3, 4, "hidden"]], [{"dimension": "tp", "start_us": 1.0, "dur_us": 2.0}]
    )
    assert t == {"exposed comm": [[1, 3]], "hidden comm": [[3, 4]], "comm tp": [[1.0, 3.0]]}
    p = tmp_path / "x.json"
    p.write_text("[1, 2]")
    with pytest.raises(TraceFormatError):
        read_trace(p)
    with pytest.raises(TraceFormatError):
        annotate_trace({"foo": 1}, {})
