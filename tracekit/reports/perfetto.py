"""Annotated trace: a copy of one rank's Chrome/Kineto trace with tracekit's tracks appended.

``annotate_trace(trace, tracks)`` takes the original trace dict and named interval lists, e.g.
``{"exposed comm": [[s, e], ...], "hidden comm": [...], "comm tp": [...]}``. Times are µs in the trace's own
time base: the same origin and unit as its events' ``ts`` (relative to ``baseTimeNanoseconds`` when the trace
has one). Each track becomes a thread of one new process ("tracekit"), with process_name/thread_name metadata
events, so Perfetto and chrome://tracing show it under the rank's own rows. Overlapping intervals of one track
go to extra lanes ("comm tp #2") so that no interval is cut or dropped: every lane's total equals its inputs.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgspec

from ..errors import ConfigError, TraceFormatError
from ..formats.core import read_bytes
from ..runtime.outputs import open_output
from .base import Output, Rendered, StreamReporter

PROCESS_NAME = "tracekit"
FIRST_PID = 0x7E5700  # far above real pids; moved up if taken
_ENCODER = msgspec.json.Encoder()
_UNTYPED = msgspec.json.Decoder(float_hook=float)


def _free_pid(used: Collection) -> int:
    pid = FIRST_PID
    while pid in used or str(pid) in used:
        pid += 1
    return pid


def _lanes(intervals: Sequence[Sequence], name: str) -> list[list[tuple[float, float, Mapping | None]]]:
    """Greedy interval partitioning: each interval into the first lane that is free at its start. An interval
    may carry a third element, ``{"name": ..., "args": {...}}``: its event's name and args."""
    lanes: list[list[tuple[float, float, Mapping | None]]] = []
    ivs = [(float(x[0]), float(x[1]), x[2] if len(x) > 2 and isinstance(x[2], Mapping) else None) for x in intervals]
    for iv in sorted(ivs, key=lambda t: (t[0], t[1])):
        if not iv[1] >= iv[0]:
            raise ConfigError(f"annotate: track {name!r}: interval {list(iv[:2])} ends before it starts")
        lane = next((ln for ln in lanes if ln[-1][1] <= iv[0]), None)
        if lane is None:
            lanes.append([iv])
        else:
            lane.append(iv)
    return lanes


def _meta(pid: int, tid: int, kind: str, value) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "ts": 0, "args": {"name" if "name" in kind else "sort_index": value}}


def added_events(pid: int, tracks: Mapping[str, Sequence[Sequence[float]]], process_name: str = PROCESS_NAME) -> list[dict]:
    """The events of one new process ``pid``: one thread per track (lane) of complete ('X') events."""
    added = [_meta(pid, 0, "process_name", process_name), _meta(pid, 0, "process_sort_index", -1)]
    tid = 0
    for name, intervals in tracks.items():
        for k, lane in enumerate(_lanes(intervals, name)):
            tid += 1
            label = name if k == 0 else f"{name} #{k + 1}"
            added += [_meta(pid, tid, "thread_name", label), _meta(pid, tid, "thread_sort_index", tid)]
            added += [
                {
                    "ph": "X",
                    "cat": "tracekit",
                    "name": str(x.get("name", name)) if x else name,
                    "pid": pid,
                    "tid": tid,
                    "ts": s,
                    "dur": e - s,
                    "args": {"track": name, **(x.get("args") or {} if x else {})},
                }
                for s, e, x in lane
            ]
    return added


def _event_pids(events: Iterable) -> set:
    return {e.get("pid") for e in events if isinstance(e, Mapping)}


def annotate_trace(trace: Mapping, tracks: Mapping[str, Sequence[Sequence[float]]], process_name: str = PROCESS_NAME) -> dict:
    """A new trace dict: ``trace`` plus one thread per track (lane) of complete ('X') events."""
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        raise TraceFormatError("annotate: the trace has no traceEvents list; is it a Chrome/Kineto trace?")
    out = dict(trace)
    out["traceEvents"] = events + added_events(_free_pid(_event_pids(events)), tracks, process_name)
    return out


_BLANK = frozenset(b" \t\r\n")


def _array_inside(buf: memoryview) -> memoryview | None:
    """The bytes between a JSON array's brackets (a view, no copy), ``None`` when ``buf`` is not an array."""
    lo, hi = 0, len(buf)
    while lo < hi and buf[lo] in _BLANK:
        lo += 1
    while hi > lo and buf[hi - 1] in _BLANK:
        hi -= 1
    if hi - lo < 2 or buf[lo] != ord("[") or buf[hi - 1] != ord("]"):
        return None
    lo, hi = lo + 1, hi - 1
    while hi > lo and buf[hi - 1] in _BLANK:
        hi -= 1
    return buf[lo:hi]


def annotated_parts(
    trace: Mapping[str, Any],
    tracks: Mapping[str, Sequence[Sequence[float]]],
    pids: Collection | None = None,
    process_name: str = PROCESS_NAME,
) -> list[bytes | memoryview]:
    """The annotated trace as pieces of JSON bytes, in order. A member given as ``msgspec.Raw`` (see
    ``loader.passthrough``) is written as its original bytes, and a raw ``traceEvents`` array keeps every event
    byte for byte: only the added events are encoded, appended inside the array. ``pids``: the pids the
    events use (the new process takes a free one)."""
    events = trace.get("traceEvents")
    if isinstance(events, list):
        events, pids = _ENCODER.encode(events), _event_pids(events) if pids is None else pids
    inside = _array_inside(memoryview(events)) if isinstance(events, (msgspec.Raw, bytes)) else None
    if inside is None:
        raise TraceFormatError("annotate: the trace has no traceEvents list; is it a Chrome/Kineto trace?")
    added = added_events(_free_pid(pids or ()), tracks, process_name)
    parts: list[bytes | memoryview] = [b"{"]
    for i, (key, value) in enumerate(trace.items()):
        head = (b"," if i else b"") + _ENCODER.encode(key) + b":"
        if key != "traceEvents":
            parts += [head, memoryview(value) if isinstance(value, msgspec.Raw) else _ENCODER.encode(value)]
            continue
        parts += [head + b"[", inside]
        if added:
            parts.append((b"," if len(inside) else b"") + b",".join(_ENCODER.encode(e) for e in added))
        parts.append(b"]")
    parts.append(b"}")
    return parts


def read_trace(path: Path | str) -> dict:
    """The trace as plain objects (numbers beyond float range read as ±inf), for callers that edit it; `tracekit
    annotate` reads through ``loader.passthrough`` instead, which keeps the bytes."""
    data = read_bytes(path, error=TraceFormatError, max_bytes=8 * 1024**3)
    try:
        trace = _UNTYPED.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceFormatError(f"{path}: cannot read as Chrome trace JSON ({exc}); pass a .json or .json.gz trace") from None
    if not isinstance(trace, dict):
        raise TraceFormatError(f"{path}: top level is not an object; pass a Kineto/Chrome trace")
    return trace


@dataclass(frozen=True, slots=True)
class TraceAnnotation:
    """A rank's original trace and the tracks to add to it (track name -> [[start_us, end_us], ...]). ``trace``'s
    members may be ``msgspec.Raw`` (written back as they are); ``pids``: the pids its events use, when known."""

    trace: Mapping[str, Any]
    tracks: Mapping[str, Sequence[Sequence[float]]]
    pids: Collection | None = None


class PerfettoReporter(StreamReporter):
    """`tracekit annotate`: the trace with tracekit's tracks, as compact JSON bytes; gzip-compressed when the
    option ``compress`` is set (by default when the file name ends in ``.gz``)."""

    format = "perfetto"
    suffix = ".json.gz"
    binary = True
    document = TraceAnnotation

    def write(self, doc: Any, stream: IO[Any], *, compress: bool = False, **_: Any) -> tuple[str, ...]:
        _write_bytes(annotated_parts(doc.trace, doc.tracks, doc.pids), stream, compress)
        return ()

    def render(self, doc: Any, out: Output, **options: Any) -> Rendered:
        if isinstance(out, (str, os.PathLike)):
            options.setdefault("compress", str(out).endswith(".gz"))
        return StreamReporter.render(self, doc, out, **options)


def _write_bytes(parts: Iterable[bytes | memoryview], stream: IO[bytes], compress: bool) -> None:
    if compress:
        with gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=6) as f:
            for part in parts:
                f.write(part)
    else:
        for part in parts:
            stream.write(part)


def write_trace(trace: Mapping, out: Path | str) -> Path:
    """``trace`` as it is (no tracks added) to ``out``; gzip-compressed when the name ends in ``.gz``."""
    out = Path(out)
    with open_output(out, "wb") as f:
        text = json.dumps(trace, separators=(",", ":"), allow_nan=False)
        _write_bytes((text.encode("utf-8"),), f, out.name.endswith(".gz"))
    return out


def tracks_from_intervals(intervals: Sequence[Sequence], collectives: Sequence[Mapping] = ()) -> dict:
    """Tracks from an analyzer's [start_us, end_us, category] list (hidden/exposed) and the per-dimension
    collective instances of the rank ([start_us, start_us + dur_us] per collective)."""
    tracks: dict[str, list] = {"exposed comm": [], "hidden comm": []}
    for s, e, cat in intervals:
        if cat in ("exposed", "hidden"):
            tracks[f"{cat} comm"].append([s, e])
    for c in collectives:
        tracks.setdefault(f"comm {c.get('dimension') or 'unknown'}", []).append(
            [float(c["start_us"]), float(c["start_us"]) + float(c["dur_us"])]
        )
    return tracks


CRITICAL_TRACK = "critical path"


def critical_track(steps: Iterable, shift_ns: int) -> dict[str, list]:
    """The critical path (``critical_path.StepPath`` objects) as one track: one event per segment, named by its kind
    (so Perfetto colours the kinds apart), with its rank, lane, op name and step in args. ``shift_ns`` is added to
    the segments' times (absolute ns on the reference rank's clock) to give the target trace's time base: for a
    rank's own trace, its clock offset minus its ``baseTimeNanoseconds``; segments shorter than 1 ns are left out."""
    out = []
    for st in steps:
        for seg in st.segments:
            if seg.dur_ns <= 0:
                continue
            s = seg.start_ns + shift_ns
            args = {"rank": seg.rank, "lane": seg.lane, "op": seg.name, "step": st.step}
            if seg.dimension:
                args["dimension"] = seg.dimension
            out.append([_us(s), _us(s + seg.dur_ns), {"name": seg.kind, "args": args}])
    return {CRITICAL_TRACK: out}


def _us(ns: int) -> float:
    q, r = divmod(int(ns), 1000)
    return q + r / 1e3
