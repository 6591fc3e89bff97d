"""Reading Kineto Chrome-trace files: bytes in (gzip inflated in chunks, with a size limit), typed structs out.

Only the fields tracekit uses are declared; msgspec skips the rest without building Python objects for them,
which is what makes this several times faster than ``json.loads`` (see DESIGN.md, "Performance facts").
"""

from __future__ import annotations

import decimal
import gc
import os
import zlib
from contextlib import contextmanager
from typing import Any

import msgspec

from ..errors import InputLimitError, TraceFormatError

# Default limit on the inflated size of one trace: a gzip bomb is refused instead of exhausting memory.
DEFAULT_MAX_BYTES = int(os.environ.get("TRACEKIT_MAX_TRACE_BYTES", 8 * 1024**3))
_CHUNK = 16 * 1024 * 1024

Num = int | float
IntOrStr = int | str


class Args(msgspec.Struct):
    # -1 (absent) rather than None when missing: the id columns then convert to numpy in one C call
    external_id: IntOrStr | None = msgspec.field(default=-1, name="External id")
    correlation: IntOrStr | None = -1
    stream: IntOrStr | None = None
    device: IntOrStr | None = -1
    coll_name: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: IntOrStr | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: IntOrStr | None = msgspec.field(default=None, name="Out msg nelems")
    in_size: IntOrStr | None = msgspec.field(default=None, name="In msg size")
    out_size: IntOrStr | None = msgspec.field(default=None, name="Out msg size")
    group_size: IntOrStr | None = msgspec.field(default=None, name="Group size")
    dtype: str | None = None
    in_split: str | list | None = msgspec.field(default=None, name="In split size")
    out_split: str | list | None = msgspec.field(default=None, name="Out split size")
    pg_name: IntOrStr | None = msgspec.field(default=None, name="Process Group Name")
    pg_id: IntOrStr | None = msgspec.field(default=None, name="Process Group ID")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: str | list | None = msgspec.field(default=None, name="Process Group Ranks")
    seq: IntOrStr | None = msgspec.field(default=None, name="Seq")
    src_rank: IntOrStr | None = msgspec.field(default=None, name="Src Rank")
    dst_rank: IntOrStr | None = msgspec.field(default=None, name="Dst Rank")
    name: str | None = None  # thread_name / process_name metadata events
    mem_bytes: IntOrStr | None = msgspec.field(default=None, name="Bytes")
    mem_total: IntOrStr | None = msgspec.field(default=None, name="Total Allocated")
    copy_bytes: IntOrStr | None = msgspec.field(default=None, name="bytes")


class Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: IntOrStr | None = None
    tid: IntOrStr | None = None
    ts: Num | None = None
    dur: Num | None = None
    args: Args | None = None


class PgConfig(msgspec.Struct):
    pg_name: IntOrStr | None = None
    pg_desc: str | None = None
    uid: IntOrStr | None = None
    backend_config: str | None = None
    pg_size: int | None = None
    ranks: list | str | None = None


class DistInfo(msgspec.Struct):
    backend: str | None = None
    rank: int | None = None
    world_size: int | None = None
    pg_count: int | None = None
    pg_config: list[PgConfig] | None = None
    nccl_version: str | None = None


class Trace(msgspec.Struct):
    traceEvents: list[Event] | None = None
    distributedInfo: DistInfo | None = None
    deviceProperties: list[dict] | None = None
    baseTimeNanoseconds: int | None = None
    trace_id: Any = None
    host_name: Any = None
    schemaVersion: Any = None
    # set by salvage_truncated, not meant to be read from a file (no trace has this key)
    truncated: bool = msgspec.field(default=False, name="~tracekit salvaged a truncated file~")


_DECODER = msgspec.json.Decoder(Trace)


@contextmanager
def gc_paused():
    """Allocation-heavy decoding runs several times faster without the cyclic collector."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class CorruptGzip(Exception):
    """zlib gave up part-way; what inflated before it is still good."""


def raw_chunks(path: str, max_bytes: int = DEFAULT_MAX_BYTES, size: int = _CHUNK):
    """The file's JSON bytes in chunks (``.gz`` inflated, concatenated members too), refused past
    ``max_bytes``: a gzip bomb never reaches memory. Raises CorruptGzip where the compressed data breaks."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 -- closed by the `with fh:` below, after the error mapping
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror or exc}); check the path and permissions") from None
    with fh:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if fh.read(2) == b"\x1f\x8b" else None
        fh.seek(0)
        total = 0
        while raw := fh.read(size):
            if inflater is None:
                total += len(raw)
                _check_size(total, max_bytes, path, "is larger than")
                yield raw
                continue
            try:
                while raw:
                    out = inflater.decompress(raw, size)
                    total += len(out)
                    _check_size(total, max_bytes, path, "inflates past")
                    yield out
                    raw = inflater.unconsumed_tail
                    if inflater.eof:
                        raw = inflater.unused_data
                        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            except zlib.error as exc:
                raise CorruptGzip(str(exc)) from None


def _check_size(total: int, max_bytes: int, path: str, verb: str) -> None:
    if total > max_bytes:
        raise InputLimitError(f"{path}: {verb} {max_bytes} bytes (a gzip bomb or a huge trace?); raise the limit "
                              "with --max-trace-bytes (or TRACEKIT_MAX_TRACE_BYTES) if it is genuine")


def read_bytes(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytearray:
    """The whole file's JSON bytes. Corrupt gzip data after a good start keeps what inflated (a truncated
    trace is salvaged by the decoder); corrupt from the start is an error."""
    data = bytearray()
    try:
        for chunk in raw_chunks(path, max_bytes):
            data += chunk
    except CorruptGzip as exc:
        if not data:
            raise TraceFormatError(f"{path}: corrupt gzip data ({exc}); re-copy or re-export the trace") from None
    return data


def decode(data: bytes | bytearray, path: str) -> tuple[Trace, list[str]]:
    """Typed decode, plus warnings. On a schema surprise fall back to a lenient per-event conversion; on
    truncated JSON keep every complete event."""
    if not data.strip():
        raise TraceFormatError(f"{path}: empty file; was the profiler stopped before export?")
    warnings: list[str] = []
    with gc_paused():
        try:
            trace = _DECODER.decode(data)
        except msgspec.ValidationError:
            trace = _lenient(_untyped(data, path), path, warnings)
        except msgspec.DecodeError as exc:
            trace = salvage_truncated(data, path, exc, warnings)
    if trace.traceEvents is None:
        raise TraceFormatError(f"{path}: JSON without 'traceEvents'; not a Kineto/Chrome trace")
    return trace, warnings


def _untyped(data: bytes, path: str) -> Any:
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not valid JSON ({exc}); is it a Kineto trace?") from None


def _lenient(obj: Any, path: str, warnings: list[str]) -> Trace:
    """Convert event by event, dropping only the events whose fields have impossible types."""
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise TraceFormatError(f"{path}: JSON without a 'traceEvents' list; not a Kineto/Chrome trace")
    events, dropped = [], 0
    for raw in obj["traceEvents"]:
        try:
            events.append(msgspec.convert(raw, Event, strict=False))
        except (msgspec.ValidationError, TypeError):
            dropped += 1
    header = {k: v for k, v in obj.items() if k != "traceEvents"}
    try:
        trace = msgspec.convert(header, Trace, strict=False)
    except msgspec.ValidationError:
        trace = Trace()
        warnings.append(f"{path}: trace header has fields of unexpected types; rank/world size may be missing")
    trace.traceEvents = events
    if dropped:
        warnings.append(f"{path}: dropped {dropped} of {len(obj['traceEvents'])} events with malformed fields")
    return trace


def salvage_truncated(data: bytes, path: str, exc: Exception, warnings: list[str]) -> Trace:
    """A trace cut short (killed process, full disk): keep every complete event before the cut."""
    start = data.find(b'"traceEvents"')
    if start < 0:
        raise TraceFormatError(f"{path}: not valid JSON ({exc}); is it a Kineto trace?") from None
    cut = len(data)
    for _ in range(8):  # the last few event boundaries; the first that closes cleanly wins
        cut = data.rfind(b"}", start, cut)
        if cut < 0:
            break
        candidate = data[: cut + 1] + b"]}"
        try:
            obj = msgspec.json.decode(candidate)
        except msgspec.DecodeError:
            continue
        events = obj.get("traceEvents") if isinstance(obj, dict) else None
        if not isinstance(events, list) or not events:
            break
        warnings.append(f"{path}: truncated at byte {len(data)}: kept {len(events)} complete events, lost the rest "
                        f"({len(data) - cut - 1} bytes); the process was probably killed during export")
        trace = _lenient(obj, path, warnings)
        trace.truncated = True
        return trace
    raise TraceFormatError(f"{path}: not valid JSON and no complete event could be salvaged ({exc})") from None


class _ExactEvent(msgspec.Struct):
    ts: decimal.Decimal | None = None
    dur: decimal.Decimal | None = None


class _ExactTrace(msgspec.Struct):
    traceEvents: list[_ExactEvent] | None = None


def needs_exact_times(trace: Trace) -> bool:
    """True when float64 µs cannot hold the trace's timestamps to the nanosecond: epoch-µs timestamps
    (beyond 2**53 ns) that carry fractional (ns-resolution) digits."""
    limit = 2**53 / 1000.0
    for e in trace.traceEvents or ():
        t = e.ts
        if type(t) is float and abs(t) >= limit and t != int(t):
            return True
    return False


def exact_times_ns(data: bytes) -> tuple[list, list] | None:
    """ts and dur of every event, in integer ns, decoded exactly from the JSON text (aligned with
    ``traceEvents``; None where absent). None when the text cannot be decoded this way."""
    try:
        with gc_paused():
            events = msgspec.json.decode(data, type=_ExactTrace).traceEvents or []
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    ts = [int((e.ts * 1000).to_integral_value()) if e.ts is not None and e.ts.is_finite() else None for e in events]
    dur = [int((e.dur * 1000).to_integral_value()) if e.dur is not None and e.dur.is_finite() else None
           for e in events]
    return ts, dur

