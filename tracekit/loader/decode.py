"""Reading Kineto Chrome-trace files: bytes in (gzip inflated in chunks, with a size limit), typed structs out.

Only the fields tracekit uses are declared; msgspec skips the rest without building Python objects for them,
which is what makes this several times faster than ``json.loads`` (see DESIGN.md, "Performance facts").
"""

from __future__ import annotations

import decimal
import math
import os
import re
import zlib
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import InputLimitError, TraceFormatError
from ..runtime.env import env_limit
from ..runtime.memory import gc_paused
from .corrupt import is_truncation, read_around, salvaged_prefix
from .files import RunGuard, open_regular
from .structs import Event, RawTrace, Trace

# Default limit on the inflated size of one trace: a gzip bomb is refused instead of exhausting memory.
DEFAULT_MAX_BYTES = int(env_limit("TRACEKIT_MAX_TRACE_BYTES", 8 * 1024**3))
_CHUNK = 16 * 1024 * 1024
# Gzip: refuse inflating past this many times the compressed bytes consumed, once past the floor. Kineto traces
# inflate 9-17x (tests/data); a bomb of whitespace or of empty events `{},` about 1000x.
DEFAULT_MAX_RATIO = env_limit("TRACEKIT_MAX_GZIP_RATIO", 200)
RATIO_FLOOR = 16 * 1024**2
_BOM = b"\xef\xbb\xbf"
_DEFAULT_MAX_STRING = int(env_limit("TRACEKIT_MAX_STRING_BYTES", 1024**2))


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """What ``raw_chunks`` refuses as the bytes stream (each an InputLimitError naming the flag that raises it)."""

    max_bytes: int = DEFAULT_MAX_BYTES  # inflated bytes in all
    max_string_bytes: int = _DEFAULT_MAX_STRING  # sets the two run lengths below
    max_ratio: float = DEFAULT_MAX_RATIO  # inflated / compressed, past RATIO_FLOOR

    @property
    def blank_block(self) -> int:
        """Whitespace runs: refused from about this length on; above the longest string allowed, so a string of
        spaces that the string limit lets through is never taken for padding."""
        return max(self.max_string_bytes, 1024**2) + 64 * 1024

    @property
    def quote_block(self) -> int:
        """Runs without a '"': a string (or a number, or punctuation) this long is refused before it is buffered."""
        return max(4 * self.max_string_bytes, 16 * 1024**2)


_DECODER = msgspec.json.Decoder(RawTrace, float_hook=float)
# Untyped: float_hook=float turns a number beyond float range (1e400) into ±inf instead of refusing the whole file;
# the event that holds it is then dropped like any other with a non-finite time.
_UNTYPED = msgspec.json.Decoder(float_hook=float)


class CorruptGzip(Exception):
    """zlib gave up part-way; what inflated before it is still good."""


def raw_chunks(
    path: str,
    limits: StreamLimits | int = DEFAULT_MAX_BYTES,
    size: int = _CHUNK,
    span: tuple[int, int] | None = None,
    notes: list[str] | None = None,
):
    """The file's JSON bytes in chunks (``.gz`` inflated, concatenated members too), refused as they stream (see
    ``StreamLimits``; an int is the max_bytes limit alone). Regular files only (``files.open_regular``); a read
    error is a TraceFormatError. Raises CorruptGzip where the compressed data breaks, TraceFormatError where a
    member fails its CRC or length check (every byte inflated, one of them wrong). ``notes`` receives what the
    gzip framing says without losing data: trailing garbage after the last member, a member without its trailer
    (its CRC never checked). ``span``: only the bytes [start, stop) of a plain (not gzip'ed) file, for one piece of
    a split trace (``split``)."""
    limits = limits if isinstance(limits, StreamLimits) else StreamLimits(max_bytes=limits)
    fh = open_regular(path)
    guards = (RunGuard(limits.blank_block, "blank"), RunGuard(limits.quote_block, "quote"))
    with fh:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if _read(fh, 2, path, 0) == b"\x1f\x8b" else None
        if span is not None and inflater is not None:
            raise ValueError("a byte range of a gzip'ed file cannot be read on its own")
        start, stop = span or (0, None)
        fh.seek(start)
        total = consumed = 0
        members, fed, member_out = 0, False, 0  # whole members inflated; the current one fed any byte, its output
        while raw := _read(fh, size if stop is None else min(size, stop - start - total), path, total):
            if inflater is None:
                if not total and not start and raw.startswith(_BOM):  # a UTF-8 byte-order mark (an editor's save): not JSON
                    raw = raw[len(_BOM) :]
                if not total and not start:
                    _check_format(raw, path, "")
                total += len(raw)
                _check(limits, guards, raw, total, 0, path)
                yield raw
                continue
            try:
                while raw:
                    fed = True
                    out = inflater.decompress(raw, size)
                    member_out += len(out)
                    # at a member's end zlib leaves the bytes after it in both unused_data and unconsumed_tail
                    consumed += len(raw) - len(inflater.unused_data if inflater.eof else inflater.unconsumed_tail)
                    if not total and out.startswith(_BOM):
                        out = out[len(_BOM) :]
                    if not total and out:
                        _check_format(out, path, "inflates to ")
                    total += len(out)
                    _check(limits, guards, out, total, consumed, path)
                    yield out
                    raw = inflater.unconsumed_tail
                    if inflater.eof:
                        raw, members, fed, member_out = inflater.unused_data, members + 1, False, 0
                        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            except zlib.error as exc:
                if "incorrect data check" in str(exc) or "incorrect length check" in str(exc):  # CRC-32 / ISIZE
                    raise TraceFormatError(
                        f"{path}: gzip member {members + 1} fails its {'CRC' if 'data' in str(exc) else 'length'} check "
                        "(a byte of the file changed: a bad copy or disk); re-copy or re-export the trace"
                    ) from None
                if members and not member_out:  # after the last whole member, bytes that are no gzip member
                    _trailing(fh, path, consumed, notes)
                    return
                raise CorruptGzip(str(exc)) from None
        if inflater is not None and fed and not inflater.eof and notes is not None:
            notes.append(
                f"{path}: the gzip data ends before the trailer of member {members + 1} (a copy cut short?): its "
                "CRC could not be checked; what inflated is read"
            )


def _trailing(fh, path: str, consumed: int, notes: list[str] | None) -> None:
    """Bytes after the last gzip member that are not another member: ignored, as gzip(1) ignores them, with a note."""
    if notes is None:
        return
    size = os.fstat(fh.fileno()).st_size
    fh.seek(consumed)
    tail = fh.read(min(size - consumed, 1 << 20))
    what = "zero bytes" if tail and not tail.strip(b"\0") else "bytes that are not gzip data"
    notes.append(f"{path}: {size - consumed} trailing {what} after the last gzip member, ignored (a bad concatenation?)")


# The first bytes of files that are not JSON text but are given as traces: other compressors under a .gz or .json
# name, an archive, tracekit's own cache and report, JSON in UTF-16/32. Each is named with the fix, instead of
# "not valid JSON (invalid character (byte 0))".
_FOREIGN = (
    (b"\x1f\x8b", "gzip data again (compressed twice)", "gunzip it once: gunzip -c FILE > TRACE.json.gz"),
    (b"BZh", "bzip2 data", "recompress it as gzip: bunzip2 -c FILE | gzip > TRACE.json.gz"),
    (b"\xfd7zXZ\x00", "xz data", "recompress it as gzip: xz -dc FILE | gzip > TRACE.json.gz"),
    (b"\x28\xb5\x2f\xfd", "zstd data", "recompress it as gzip: zstd -dc FILE | gzip > TRACE.json.gz"),
    (b"PK\x03\x04", "a zip archive", "extract the trace from it: unzip FILE"),
    (b"PAR1", "a Parquet file (tracekit's cache?)", "give the trace itself, not its .tracekit_cache entry"),
    (b"\xff\xfe\x00\x00", "UTF-32 text", "re-save it as UTF-8: iconv -f UTF-32 -t UTF-8 FILE"),
    (b"\x00\x00\xfe\xff", "UTF-32 text", "re-save it as UTF-8: iconv -f UTF-32 -t UTF-8 FILE"),
    (b"\xff\xfe", "UTF-16 text", "re-save it as UTF-8: iconv -f UTF-16 -t UTF-8 FILE"),
    (b"\xfe\xff", "UTF-16 text", "re-save it as UTF-8: iconv -f UTF-16 -t UTF-8 FILE"),
)


def _check_format(head: bytes, path: str, verb: str) -> None:
    """Refuse in one line a file whose first bytes say it is not JSON text (see _FOREIGN)."""
    what = fix = ""
    for magic, what_, fix_ in _FOREIGN:
        if head.startswith(magic):
            what, fix = what_, fix_
            break
    else:
        if b"\x00" in head[:4]:  # JSON in UTF-8 holds no NUL byte; '{' in UTF-16/32 without a BOM has 1 to 3
            what, fix = "UTF-16 or UTF-32 text", "re-save it as UTF-8: iconv -f UTF-16 -t UTF-8 FILE"
        elif head[:64].lstrip().lower().startswith((b"<!doctype", b"<html")):
            what, fix = "an HTML page (a tracekit report?)", "give the trace the report was made from"
    if what:
        raise TraceFormatError(f"{path}: {verb or 'is '}{what}, not a JSON trace; {fix}")


def _read(fh, size: int, path: str, at: int) -> bytes:
    try:
        return fh.read(size)
    except OSError as exc:
        raise TraceFormatError(
            f"{path}: read error after {at} bytes ({exc.strerror or exc}); check the disk or re-copy the trace"
        ) from None


def _check(limits: StreamLimits, guards: tuple[RunGuard, ...], chunk: bytes, total: int, consumed: int, path: str) -> None:
    """``consumed``: compressed bytes inflated so far (0 for a plain file)."""
    if total > limits.max_bytes:
        raise InputLimitError(
            f"{path}: {'inflates past' if consumed else 'is larger than'} {limits.max_bytes} bytes "
            "(a gzip bomb or a huge trace?); raise the limit with --max-trace-bytes (or "
            "TRACEKIT_MAX_TRACE_BYTES) if it is genuine"
        )
    if consumed and total > RATIO_FLOOR and total > limits.max_ratio * consumed:
        raise InputLimitError(
            f"{path}: {consumed} gzip'ed bytes inflate to {total} (more than {limits.max_ratio:g}x; "
            "traces inflate about 10x: a gzip bomb?); raise the ratio with TRACEKIT_MAX_GZIP_RATIO "
            "if it is genuine"
        )
    blank, quote = guards
    if blank.feed(chunk):
        raise InputLimitError(
            f"{path}: more than {blank.block} whitespace bytes in a row before byte {total} "
            "(padding, a whitespace bomb?); no string tracekit accepts is that long: raise "
            "--max-string-bytes (or TRACEKIT_MAX_STRING_BYTES) if it is genuine"
        )
    if quote.feed(chunk):
        raise InputLimitError(
            f"{path}: more than {quote.block} bytes without a '\"' before byte {total} (a string "
            "far beyond the string limit, or garbage); raise --max-string-bytes (or "
            "TRACEKIT_MAX_STRING_BYTES) if it is genuine"
        )


def read_bytes(path: str, limits: StreamLimits | int = DEFAULT_MAX_BYTES, notes: list[str] | None = None) -> bytearray:
    """The whole file's JSON bytes. Corrupt gzip data after a good start keeps what inflated (a truncated
    trace is salvaged by the decoder), with a note; corrupt from the start is an error."""
    data = bytearray()
    try:
        for chunk in raw_chunks(path, limits, notes=notes):
            data += chunk
    except CorruptGzip as exc:
        if not data:
            raise TraceFormatError(f"{path}: corrupt gzip data ({exc}); re-copy or re-export the trace") from None
        if notes is not None:
            notes.append(f"{path}: corrupt gzip data after {len(data)} inflated bytes ({exc}); read what inflated")
    return data


def decode(data: bytes | bytearray, path: str) -> tuple[Trace, list[str]]:
    """Typed decode, plus warnings. On a schema surprise fall back to a lenient per-event conversion; on
    truncated JSON keep every complete event; a lone UTF-16 surrogate escape (``"\\ud800"``, which Python's
    json writes for a broken name and msgspec refuses) becomes U+FFFD. ``data`` is briefly modified in place (see
    ``check_one_events``)."""
    if _NOT_BLANK.search(data) is None:
        raise TraceFormatError(f"{path}: empty file; was the profiler stopped before export?")
    warnings: list[str] = []
    try:
        try:
            trace = _decode(data, path, warnings)
        except _LoneSurrogates:
            data, warning = mend_lone_surrogates(data, path)
            warnings += [warning] if warning else []
            trace = _decode(data, path, warnings)
    except RecursionError:
        raise TraceFormatError(too_deep(path)) from None
    if trace.traceEvents is None:
        raise TraceFormatError(f"{path}: JSON without 'traceEvents'; not a Kineto/Chrome trace")
    check_one_events(data, path, 0)
    return trace, warnings


class _LoneSurrogates(Exception):
    pass


_NOT_BLANK = re.compile(rb"[^ \t\r\n]")
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def mend_lone_surrogates(data: bytes | bytearray, path: str) -> tuple[bytes | bytearray, str | None]:
    """``data`` with each lone UTF-16 surrogate escape (which msgspec refuses) written ``\\ufffd`` (as long, so no
    offset moves), and the warning to give; ``data`` itself and ``None`` when there is none."""
    mended, n = _LONE_SURROGATE.subn(rb"\\ufffd", data)
    if not n:
        return data, None
    return mended, (
        f"{path}: {n} lone UTF-16 surrogate escapes in strings (a name cut in the middle of a character?) read as U+FFFD"
    )


def _decode(data: bytes | bytearray, path: str, warnings: list[str]) -> Trace:
    with gc_paused():
        try:
            return _typed(_DECODER.decode(data), path, warnings)
        except msgspec.ValidationError:
            return _lenient(_untyped(data, path), path, warnings)
        except msgspec.DecodeError as exc:
            if "surrogate" in str(exc) and _LONE_SURROGATE.search(data):
                raise _LoneSurrogates from None
            if is_truncation(exc):
                return salvage_truncated(data, path, exc, warnings)
            return _read_around(data, path, exc, warnings)


def _read_around(data: bytes | bytearray, path: str, exc: Exception, warnings: list[str]) -> Trace:
    """A complete file with corrupt bytes: the events holding them dropped (counted), the rest kept (``corrupt``)."""
    found = read_around(data, path, exc)
    warnings.append(found.warning(path))
    trace = _lenient(found.doc, path, warnings)
    trace.dropped = [(ts, corr, "corrupt") for ts, corr in found.cut] + trace.dropped
    trace.truncated = found.truncated
    return trace


def too_deep(path: str) -> str:
    return (
        f"{path}: JSON nested too deeply (hundreds of levels of arrays or objects); no Kineto trace is, the "
        "file is corrupt or crafted"
    )


def _typed(raw: RawTrace, path: str, warnings: list[str]) -> Trace:
    from .header import HEADER_FIELDS, clean_header

    trace, notes = clean_header({k: getattr(raw, k) for k in HEADER_FIELDS}, path)
    trace.traceEvents = raw.traceEvents
    warnings += notes
    return trace


_KEY = b'"traceEvents"'


class _Probe(msgspec.Struct):
    renamed: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="traceEventZ")


def check_one_events(data: bytes | bytearray, path: str, start: int, prefix: bytes = b"") -> None:
    """Refuse a document with two top-level 'traceEvents' keys (a decoder keeps one of them: part of the events
    would silently vanish). Each occurrence of the key from ``start`` on is renamed in place, the document
    decoded for the renamed key only (msgspec skips the rest), and restored: a nested key of the same name
    is not an error."""
    if data.count(_KEY, start) < 2 - (1 if prefix else 0):
        return
    if not isinstance(data, bytearray):
        data = bytearray(data)
    at, found, tries = data.find(_KEY, start), 0, 0
    while at >= 0 and tries < 16:
        data[at + 11] = ord("Z")
        try:
            probe = msgspec.json.decode(prefix + data if prefix else data, type=_Probe)
            found += len(probe.renamed) > 0
        except (msgspec.DecodeError, RecursionError):
            pass
        finally:
            data[at + 11] = ord("s")
        at, tries = data.find(_KEY, at + 1), tries + 1
    if found + (1 if prefix else 0) >= 2:
        raise TraceFormatError(
            f"{path}: two 'traceEvents' arrays in one trace (a bad merge?); a JSON reader keeps "
            "only one of them: merge the arrays into one, or split the file"
        )


def _untyped(data: bytes | bytearray, path: str) -> Any:
    try:
        return _UNTYPED.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"{path}: not valid JSON ({exc}); is it a Kineto trace?") from None


def _lenient(obj: Any, path: str, warnings: list[str]) -> Trace:
    """Convert event by event, dropping only the events whose fields have impossible types; the header field by
    field (``header.clean_header``)."""
    from .header import clean_header

    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise TraceFormatError(f"{path}: JSON without a 'traceEvents' list; not a Kineto/Chrome trace")
    events, dropped = [], []
    for raw in obj["traceEvents"]:
        try:
            events.append(msgspec.convert(raw, Event, strict=False))
        except (msgspec.ValidationError, TypeError):
            dropped.append(_where(raw))
    trace, notes = clean_header(obj, path)
    warnings += notes
    trace.traceEvents = events
    trace.dropped = dropped
    if dropped:
        warnings.append(
            f"{path}: dropped {len(dropped)} of {len(obj['traceEvents'])} events with malformed fields; the steps "
            "they lay in are marked incomplete"
        )
    return trace


def _where(raw: Any) -> tuple[Any, int, str]:
    """(ts as written, correlation id or -1, "malformed") of an event that could not be converted: where it lay, if
    it says."""
    if not isinstance(raw, dict):
        return None, -1, "malformed"
    args = raw.get("args")
    corr = args.get("correlation") if isinstance(args, dict) else None
    return raw.get("ts"), corr if type(corr) is int and 0 <= corr < 2**62 else -1, "malformed"


def salvage_truncated(data: bytes | bytearray, path: str, exc: Exception, warnings: list[str]) -> Trace:
    """A trace cut short (killed process, full disk): keep every complete event before the cut."""
    _, obj, warning = salvaged_prefix(data, path, exc)
    warnings.append(warning)
    trace = _lenient(obj, path, warnings)
    trace.truncated = True
    return trace


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
        if type(t) is float and limit <= abs(t) < math.inf and t != int(t):
            return True
    return False


def exact_times_ns(data: bytes | bytearray) -> tuple[list, list] | None:
    """ts and dur of every event, in integer ns, decoded exactly from the JSON text (aligned with
    ``traceEvents``; None where absent). None when the text cannot be decoded this way."""
    try:
        with gc_paused():
            events = msgspec.json.decode(data, type=_ExactTrace).traceEvents or []
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    ts = [int((e.ts * 1000).to_integral_value()) if e.ts is not None and e.ts.is_finite() else None for e in events]
    dur = [int((e.dur * 1000).to_integral_value()) if e.dur is not None and e.dur.is_finite() else None for e in events]
    return ts, dur
