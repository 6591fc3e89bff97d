"""One trace holding every rank on the corrected common clock: `tracekit annotate DIR -o merged.json.gz`.

Each rank's events are written with their ``ts`` moved onto the reference rank's clock (the rank's estimated
clock offset, tracekit.analyzers.comm.clocks, and its own ``baseTimeNanoseconds`` taken into account: ``ts`` +
``shift_ns`` / 1000), their pids renumbered per rank (``(rank + 1) * 1000 + i``, each labelled with a
``process_name`` "rank N · <original name>"), and the ids that link events (flow ``id``/``bind_id``, ``args``
``correlation`` and ``External id``) made unique per rank (``id * stride + rank``, ``stride`` the number of ranks
or more; a string id gets ``r<rank>:`` in front). Every other field is written as the rank's trace has it.

Ranks are streamed one at a time: a rank's trace is read through the loader's pass-through (its bytes, the loader's
limits), its events array split into one raw slice per event, and the events decoded, moved and encoded
CHUNK_EVENTS at a time into the (gzip) output. No trace is ever decoded whole into Python objects, and the output
goes to a temporary file next to the target that replaces it only when complete.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import msgspec

from ..errors import ConfigError, TraceFormatError
from ..runtime.outputs import check_output, is_special, open_output
from .base import Output, Rendered, StreamReporter
from .perfetto import _ENCODER, added_events

PID_STRIDE = 1000  # pids of rank r: (r + 1) * PID_STRIDE + i
LINK_ARGS = ("correlation", "External id")
MERGED_MEMBER = "tracekit_merged"  # the top-level member that says how each rank was moved
_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS_CHUNK = msgspec.json.Decoder(list, float_hook=float)
CHUNK_EVENTS = 4096  # events decoded, moved and encoded at a time


@dataclass(frozen=True, slots=True)
class MergeRank:
    """One rank of the merged trace: ``read()`` returns its trace as ``loader.passthrough.TraceBytes`` (called once,
    when the rank is written); ``shift_ns`` is added to its times (its base time minus its clock offset minus the
    merged trace's base time)."""

    rank: int
    read: Callable[[], Any]
    shift_ns: int
    offset_ns: int = 0
    source: str = ""


@dataclass(frozen=True, slots=True)
class MergedTrace:
    """The document `annotate DIR` renders: the ranks in order, the merged base time (the reference rank's), the
    top-level members to keep (from the reference rank's trace) and tracks in the merged time base."""

    ranks: Sequence[MergeRank]
    base_time_ns: int
    tracks: Mapping[str, Sequence[Sequence]] = field(default_factory=dict)
    track_process: str = "tracekit"


def _link(value: Any, rank: int, stride: int) -> Any:
    if value.__class__ is int:
        return value * stride + rank
    if value.__class__ is str:
        return f"r{rank}:{value}"
    return value


class _Rank:
    """The per-rank rewrite of one event dict, in place."""

    def __init__(self, mr: MergeRank, stride: int) -> None:
        self.rank, self.stride, self.shift_us = mr.rank, stride, mr.shift_ns / 1e3
        self.pids: dict[Any, int] = {}
        self.named: set[int] = set()

    def pid(self, pid: Any) -> int:
        new = self.pids.get(pid)
        if new is None:
            if len(self.pids) >= PID_STRIDE:
                raise TraceFormatError(f"rank {self.rank}: more than {PID_STRIDE} distinct pids; cannot merge this trace")
            new = self.pids[pid] = (self.rank + 1) * PID_STRIDE + len(self.pids)
        return new

    def event(self, e: Any) -> Any:
        """``e`` moved onto the merged clock, its pid and link ids renumbered (in place; not an object: as is)."""
        if e.__class__ is not dict:
            return e
        ph = e.get("ph")
        if "pid" in e:
            p = e["pid"]
            e["pid"] = self.pids.get(p) or self.pid(p)
        if ph != "M":
            ts = e.get("ts")
            if ts.__class__ is float or ts.__class__ is int:
                e["ts"] = ts + self.shift_us
        if "id" in e:
            e["id"] = _link(e["id"], self.rank, self.stride)
        if "bind_id" in e:
            e["bind_id"] = _link(e["bind_id"], self.rank, self.stride)
        args = e.get("args")
        if args.__class__ is dict:
            if "correlation" in args:
                args["correlation"] = _link(args["correlation"], self.rank, self.stride)
            if "External id" in args:
                args["External id"] = _link(args["External id"], self.rank, self.stride)
            if ph == "M" and "pid" in e:
                if e.get("name") == "process_name":
                    args["name"] = f"rank {self.rank} · {args.get('name', '')}".rstrip(" ·")
                    self.named.add(e["pid"])
                elif e.get("name") == "process_sort_index":
                    args["sort_index"] = e["pid"]
        return e

    def labels(self) -> list[dict]:
        """process_name (and sort index) for every pid the rank's trace left unnamed."""
        out = []
        for pid in sorted(set(self.pids.values()) - self.named):
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "args": {"name": f"rank {self.rank}"}})
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "ts": 0, "args": {"sort_index": pid}})
        return out


def merged_parts(doc: MergedTrace, notes: list[str]):
    """The merged trace as pieces of JSON bytes, rank by rank."""
    stride = max([len(doc.ranks), *(r.rank + 1 for r in doc.ranks)])
    head: dict[str, Any] = {}
    ranks_info = []
    yield b'{"traceEvents":['
    first = True
    for mr in doc.ranks:
        source = mr.read()
        for w in source.warnings:
            notes.append(f"rank {mr.rank}: {w}")
        if not head:
            head = {k: v for k, v in source.members.items() if k not in ("traceEvents", "distributedInfo", "baseTimeNanoseconds")}
        try:
            raws = _EVENTS.decode(source.members["traceEvents"])
        except msgspec.DecodeError as exc:
            raise TraceFormatError(f"rank {mr.rank} ({mr.source}): traceEvents is not a list of events ({exc})") from None
        rw = _Rank(mr, stride)
        for i in range(0, len(raws), CHUNK_EVENTS):  # a chunk of events decoded at a time, never the whole array
            chunk = _EVENTS_CHUNK.decode(b"[" + b",".join(raws[i : i + CHUNK_EVENTS]) + b"]")
            yield (b"" if first else b",") + _ENCODER.encode([rw.event(e) for e in chunk])[1:-1]
            first = False
        labels = rw.labels()
        if labels:
            yield (b"" if first else b",") + b",".join(_ENCODER.encode(e) for e in labels)
            first = False
        ranks_info.append(
            {
                "rank": mr.rank,
                "source": mr.source,
                "offset_us": mr.offset_ns / 1e3,
                "shift_us": mr.shift_ns / 1e3,
                "pids": {str(k): v for k, v in rw.pids.items()},
                "id_stride": stride,
                "events": len(raws),
            }
        )
        del raws, source
    if doc.tracks:
        added = added_events(PID_STRIDE * (stride + 2), doc.tracks, doc.track_process)
        yield (b"" if first else b",") + b",".join(_ENCODER.encode(e) for e in added)
    yield b"]"
    for k, v in head.items():
        yield b"," + _ENCODER.encode(k) + b":" + (bytes(v) if isinstance(v, msgspec.Raw) else _ENCODER.encode(v))
    yield b',"baseTimeNanoseconds":' + _ENCODER.encode(doc.base_time_ns)
    yield b',"' + MERGED_MEMBER.encode() + b'":' + _ENCODER.encode({"ranks": ranks_info})
    yield b"}"


class MergedPerfettoReporter(StreamReporter):
    """`tracekit annotate DIR -o merged.json.gz`: every rank in one trace (gzip when the name ends in ``.gz``),
    written through a temporary file so that a failure leaves no half-written output."""

    format = "perfetto-merged"
    suffix = ".json.gz"
    binary = True
    document = MergedTrace

    def write(self, doc: Any, stream: IO[Any], *, compress: bool = False, **_: Any) -> tuple[str, ...]:
        notes: list[str] = []
        if compress:
            with gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=6) as f:
                for part in merged_parts(doc, notes):
                    f.write(part)
        else:
            for part in merged_parts(doc, notes):
                stream.write(part)
        return tuple(notes)

    def render(self, doc: Any, out: Output, **options: Any) -> Rendered:
        self.check(doc)
        if not isinstance(out, (str, os.PathLike)):
            return Rendered(None, 0, self.write(doc, out, **options))
        path = check_output(out)
        options.setdefault("compress", path.name.endswith(".gz"))
        if is_special(path):  # /dev/null, a FIFO: written in place; a rename would replace the device itself
            with open_output(path, "wb") as f:
                notes = self.write(doc, f, **options)
            return Rendered(path, 0, notes)
        tmp = path.with_name(f".{path.name}.tracekit-partial")
        try:
            with open_output(tmp, "wb") as f:
                notes = self.write(doc, f, **options)
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise ConfigError(
                    f"{str(path)!r}: cannot write the output ({exc.strerror}); choose a writable file path"
                ) from None
        finally:
            tmp.unlink(missing_ok=True)
        return Rendered(path, path.stat().st_size, notes)
