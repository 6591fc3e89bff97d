"""Streaming decode of a Kineto trace: the events array in pieces of a few MiB, the header around it."""

from __future__ import annotations

import msgspec

from .decode import DEFAULT_MAX_BYTES, CorruptGzip, Event, Trace, gc_paused, raw_chunks

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


class EventStream:
    """Iterate over lists of events; afterwards ``header`` holds the trace's other fields (some, such as
    ``baseTimeNanoseconds``, come after the events in Kineto's files)."""

    def __init__(self, path: str, max_bytes: int = DEFAULT_MAX_BYTES, piece_bytes: int | None = None):
        self.path, self.max_bytes = path, max_bytes
        self.piece = piece_bytes or PIECE_BYTES
        self.header: Trace | None = None

    def __iter__(self):
        chunks = self._chunks()
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

    def _chunks(self):
        try:
            yield from raw_chunks(self.path, self.max_bytes, max(self.piece, 1 << 16))
        except CorruptGzip:
            raise NotStreamable("corrupt gzip: the whole-file path keeps what inflated") from None

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
