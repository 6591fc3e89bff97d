"""Test helper: the tracekit annotations and gloo spans of one trace, per ProfilerStep (not the loader)."""

from __future__ import annotations

import gzip
import json

from tracekit.formats.comm_annotation import parse


def read(path):
    with gzip.open(path) as f:
        return json.load(f)


def comm_by_step(trace) -> list[list]:
    """The ``tracekit:comm`` annotations inside each ProfilerStep window, in time order."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("ProfilerStep#"))
    comms = sorted((e["ts"], parse(e["name"])) for e in events if e["name"].startswith("tracekit:comm|"))
    return [[a for ts, a in comms if lo <= ts < hi] for lo, hi in steps]


def gloo_spans(trace) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("gloo:")]
