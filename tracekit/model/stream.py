"""Streaming decode of a Kineto trace: the events array in pieces of a few MiB, the header around it."""

from __future__ import annotations

import zlib

import msgspec

from ..errors import InputLimitError, TraceFormatError
from .decode import _CHUNK, DEFAULT_MAX_BYTES, Event, Trace, gc_paused

# -- streaming: the events array decoded in pieces of a few MiB, so the whole file and the whole list of
# structs never sit in memory at once (peak memory ~ the columns, not the JSON). Anything unusual (a type
# surprise, truncation, a layout this reader does not expect) raises NotStreamable and the caller falls
# back to the whole-file path above, which knows how to be lenient.

PIECE_BYTES = 4 * 1024 * 1024
_EVENTS_DECODER = msgspec.json.Decoder(list[Event])
_HEADER_FIELDS = ("distributedInfo", "deviceProperties", "baseTimeNanoseconds", "trace_id", "host_name",
                  "schemaVersion")


class NotStreamable(Exception):
    """The streaming reader cannot take this file; use the whole-file path."""


def raw_chunks(path: str, max_bytes: int = DEFAULT_MAX_BYTES, size: int = _CHUNK):
    """The file's JSON bytes in chunks (``.gz`` inflated), refused past ``max_bytes`` as ``read_bytes`` does."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read ({exc.strerror or exc}); check the path and permissions") from None
    with fh:
        gz = fh.read(2) == b"\x1f\x8b"
        fh.seek(0)
        total = 0
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if gz else None
        while True:
            raw = fh.read(size)
            if not raw:
                break
            if inflater is None:
                total += len(raw)
                if total > max_bytes:
                    raise InputLimitError(f"{path}: larger than {max_bytes} bytes; raise the limit with "
                                          "--max-trace-bytes (or TRACEKIT_MAX_TRACE_BYTES) if it is genuine")
                yield raw
                continue
            try:
                while raw:
                    out = inflater.decompress(raw, size)
                    total += len(out)
                    if total > max_bytes:
                        raise InputLimitError(f"{path}: inflates past {max_bytes} bytes (a gzip bomb or a huge "
                                              "trace); raise the limit with --max-trace-bytes if it is genuine")
                    yield out
                    raw = inflater.unconsumed_tail
                    if inflater.eof:
                        rest = inflater.unused_data
                        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                        raw = rest
            except zlib.error:
                raise NotStreamable("corrupt gzip") from None


class EventStream:
    """Iterate over lists of events; afterwards ``header`` holds the trace's other fields (some, such as
    ``baseTimeNanoseconds``, come after the events in Kineto's files)."""

    def __init__(self, path: str, max_bytes: int = DEFAULT_MAX_BYTES, piece_bytes: int | None = None):
        self.path, self.max_bytes = path, max_bytes
        self.piece = piece_bytes or PIECE_BYTES
        self.header: Trace | None = None

    def __iter__(self):
        chunks = raw_chunks(self.path, self.max_bytes, max(self.piece, 1 << 16))
        buf, head = self._head(chunks)
        with gc_paused():
            for chunk in chunks:
                buf += chunk
                while len(buf) >= self.piece:
                    events, buf = self._cut(buf)
                    if events is None:
                        break
                    yield events
            try:
                tail = msgspec.json.decode(b'{"traceEvents":[' + buf, type=Trace)
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise NotStreamable("truncated or malformed end") from None
        del buf
        for name in _HEADER_FIELDS:
            if getattr(tail, name) is None:
                setattr(tail, name, getattr(head, name))
        events, tail.traceEvents = tail.traceEvents or [], None
        self.header = tail
        if events:
            yield events

    def _head(self, chunks) -> tuple[bytes, Trace]:
        buf = b""
        for chunk in chunks:
            buf += chunk
            at = buf.find(b'"traceEvents"')
            if at >= 0:
                rest = buf[at + len(b'"traceEvents"'):].lstrip()
                if len(rest) >= 2:
                    if rest[:1] != b":" or rest[1:].lstrip()[:1] != b"[":
                        raise NotStreamable("traceEvents is not an array")
                    body = rest[1:].lstrip()[1:]
                    try:
                        head = msgspec.json.decode(buf[:at] + b'"traceEvents":[]}', type=Trace)
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        raise NotStreamable("unexpected header") from None
                    return body, head
            if len(buf) > 64 * 1024 * 1024:
                break
        raise NotStreamable("no traceEvents array near the start")

    def _cut(self, buf: bytes):
        """Decode the events before the last event boundary in ``buf``; return them and the remainder."""
        end = len(buf)
        for _ in range(32):
            pos = buf.rfind(b"{", 0, end)
            if pos <= 0:
                return None, buf
            before = buf[max(0, pos - 64):pos].rstrip()
            if before.endswith(b",") and before[:-1].rstrip().endswith(b"}"):
                close = buf.rfind(b"}", 0, pos)
                try:
                    return _EVENTS_DECODER.decode(b"".join((b"[", buf[:close + 1], b"]"))), buf[pos:]
                except msgspec.ValidationError:
                    raise NotStreamable("field of an unexpected type") from None
                except msgspec.DecodeError:
                    pass  # a boundary inside a string or a nested object: try an earlier one
            end = pos
        return None, buf
