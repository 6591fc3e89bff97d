"""Streaming decode of a Kineto trace: the events array in pieces of a few MiB, the header around it."""

from __future__ import annotations

import re
from collections.abc import Generator, Iterable, Iterator

import msgspec

from ..errors import TraceFormatError
from ..runtime.memory import gc_paused
from .decode import (
    CorruptGzip,
    Event,
    RawTrace,
    StreamLimits,
    Trace,
    check_one_events,
    raw_chunks,
    too_deep,
)
from .header import HEADER_FIELDS, clean_header

# -- streaming: the events array decoded in pieces of a few MiB, so the whole file and the whole list of
# structs never sit in memory at once (peak memory ~ the columns, not the JSON). Anything unusual (a type
# surprise, truncation, a layout this reader does not expect) raises NotStreamable and the caller falls
# back to the whole-file path, which knows how to be lenient.
#
# Linear time: pending bytes live in one bytearray (appended to, consumed from the front), and each search for
# an event boundary starts where the previous one gave up, so a stretch without boundaries is looked at once,
# not once per chunk (concatenating bytes and searching from the start made a 1 GiB gzip bomb take 100 s).

# Small pieces: the ~2,700 events of 512 KiB of JSON decode to ~1.5 MB of structs, which the dozen passes that
# turn them into columns (columnar.TableBuilder.add) then find in the core's cache; 4 MiB pieces (~20 k events,
# ~12 MB of structs) cost about 1.5x the CPU per event (benchmarks/piece_size.py).
PIECE_BYTES = 512 * 1024
MAX_GAP = 64 * 1024 * 1024  # pending bytes without a usable event boundary: not a stream this reader can cut
_DECODE_TRIES = 3  # candidate boundaries decoded per cut (one inside a string fails to decode)
_LOOKS = 64  # '{' looked at per cut
_KEY = b'"traceEvents"'
_TAIL_PREFIX = b'{"traceEvents":['
_OPEN = re.compile(rb"[ \t\r\n]*(:[ \t\r\n]*(\[)?)?")
_EVENTS_DECODER = msgspec.json.Decoder(list[Event])
_RAW_DECODER = msgspec.json.Decoder(RawTrace, float_hook=float)


class NotStreamable(Exception):
    """The streaming reader cannot take this file; use the whole-file path."""


class EventStream:
    """Iterate over lists of events; afterwards ``header`` holds the trace's other fields (some, such as
    ``baseTimeNanoseconds``, come after the events in Kineto's files) and ``warnings`` the header fields that
    were dropped."""

    def __init__(
        self,
        path: str,
        limits: StreamLimits | None = None,
        piece_bytes: int | None = None,
        span: tuple[int, int, bool] | None = None,
    ):
        """``span``: (start, stop, last) -- only the events in bytes [start, stop) of a plain file, ``start`` at
        an event's ``{`` and ``stop`` just after an event's ``,`` (or the end of the file when ``last``): one
        piece of a split trace (``split``). Then ``header`` stays None and ``tail`` holds what follows the events
        (the last piece only)."""
        self.path, self.limits = path, limits or StreamLimits()
        self.piece = piece_bytes or PIECE_BYTES
        self.max_gap = max(MAX_GAP, 4 * self.piece)
        self.header: Trace | None = None
        self.tail: RawTrace | None = None
        self.warnings: list[str] = []
        self.notes: list[str] = []  # what the gzip framing said (trailing garbage, a missing trailer): raw_chunks
        self.span = span

    def __iter__(self) -> Iterator[list[Event]]:
        if self.span is not None:
            yield from self._span()
            return
        chunks = self._chunks()
        buf, head = self._head(chunks)
        with gc_paused():
            yield from self._whole_events(buf, chunks)
            tail = self._tail(buf)
        del buf
        self.header = self.merge(head, tail)
        events, tail.traceEvents = tail.traceEvents or [], None
        if events:
            yield events

    def _span(self) -> Iterator[list[Event]]:
        assert self.span is not None
        start, stop, last = self.span
        buf = bytearray()
        with gc_paused():
            yield from self._whole_events(buf, raw_chunks(self.path, self.limits, max(self.piece, 1 << 16), (start, stop)))
            if last:
                self.tail = self._tail(buf)
                events, self.tail.traceEvents = self.tail.traceEvents or [], None
            else:
                events = self._rest(buf)
        del buf
        if events:
            yield events

    def _whole_events(self, buf: bytearray, chunks: Iterable[bytes]) -> Iterator[list[Event]]:
        """Append ``chunks`` to ``buf`` and yield the whole events cut off its front once a piece's worth has
        gathered; what follows the last boundary stays in ``buf`` (changed in place) for the caller's end."""
        lo = 0  # the next boundary search starts here: what lies before was searched already
        for chunk in chunks:
            buf += chunk
            if len(buf) < self.piece:
                continue
            events, cut = self._cut(buf, lo)
            if events is None:
                if len(buf) > self.max_gap:
                    raise NotStreamable(f"no event boundary in {len(buf)} bytes")
                lo = len(buf)
                continue
            del buf[:cut]  # O(1) for a bytearray: CPython moves its start
            lo = 0
            yield events

    def _rest(self, buf: bytearray) -> list[Event]:
        """The events of a middle piece's end: ``buf`` is whole events separated by commas, one after the last."""
        body = bytes(buf).rstrip()
        if not body.endswith(b","):
            raise NotStreamable("a piece does not end at an event boundary")
        try:
            return _EVENTS_DECODER.decode(b"[" + body[:-1] + b"]")
        except msgspec.ValidationError:
            raise NotStreamable("field of an unexpected type") from None
        except msgspec.DecodeError:
            raise NotStreamable("a piece is not whole events (a cut inside a string?)") from None
        except RecursionError:
            raise TraceFormatError(too_deep(self.path)) from None

    def _chunks(self) -> Generator[bytes, None, None]:
        try:
            yield from raw_chunks(self.path, self.limits, max(self.piece, 1 << 16), notes=self.notes)
        except CorruptGzip:
            raise NotStreamable("corrupt gzip: the whole-file path keeps what inflated") from None

    def head(self) -> tuple[RawTrace, int]:
        """The header fields before ``traceEvents`` and the offset of the array's first byte after ``[`` (a plain
        file's), reading only as far as that."""
        chunks, seen = self._chunks(), [0]

        def counted():
            for chunk in chunks:
                seen[0] += len(chunk)
                yield chunk

        try:
            buf, head = self._head(counted())
        finally:
            chunks.close()
        return head, seen[0] - len(buf)

    def _head(self, chunks: Iterator[bytes]) -> tuple[bytearray, RawTrace]:
        buf, searched = bytearray(), 0
        for chunk in chunks:
            buf += chunk
            at = buf.find(_KEY, max(0, searched - len(_KEY)))
            if at < 0:
                searched = len(buf)
                if len(buf) > self.max_gap:
                    break
                continue
            searched = at
            m = _OPEN.match(buf, at + len(_KEY))  # always matches (everything in it is optional)
            if m is None or m.group(2) is None:
                if m is not None and m.end() == len(buf):
                    continue  # only blanks (and the ':') so far
                raise NotStreamable("traceEvents is not an array")
            body_at = m.end()
            try:
                head = _RAW_DECODER.decode(bytes(buf[:at]) + b'"traceEvents":[]}')
            except (msgspec.DecodeError, msgspec.ValidationError):
                raise NotStreamable("unexpected header") from None
            except RecursionError:
                raise TraceFormatError(too_deep(self.path)) from None
            del buf[:body_at]
            return buf, head
        raise NotStreamable("no traceEvents array near the start")

    def _cut(self, buf: bytearray, lo: int) -> tuple[list[Event] | None, int]:
        """Decode the events before the last event boundary in ``buf`` (a ``{`` at or after ``lo``); return them
        and where the rest starts, or (None, 0)."""
        end, tries = len(buf), 0
        for _ in range(_LOOKS):
            pos = buf.rfind(b"{", lo, end)
            if pos <= 0:
                break
            before = bytes(buf[max(0, pos - 64) : pos]).rstrip()
            if not before:  # a long blank run before the '{' (shorter than the limit on blank runs)
                before = bytes(buf[max(0, pos - self.limits.blank_block) : pos]).rstrip()[-64:]
            if before.endswith(b",") and before[:-1].rstrip().endswith(b"}"):
                close = buf.rfind(b"}", 0, pos)
                piece = bytearray(b"[")
                with memoryview(buf) as view:
                    piece += view[: close + 1]
                piece += b"]"
                try:
                    return _EVENTS_DECODER.decode(piece), pos
                except msgspec.ValidationError:
                    raise NotStreamable("field of an unexpected type") from None
                except msgspec.DecodeError:
                    tries += 1  # a boundary inside a string or a nested object: try an earlier one
                    if tries >= _DECODE_TRIES:
                        break
                except RecursionError:
                    raise TraceFormatError(too_deep(self.path)) from None
            end = pos
        return None, 0

    def _tail(self, buf: bytearray) -> RawTrace:
        try:
            tail = _RAW_DECODER.decode(_TAIL_PREFIX + buf)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise NotStreamable("truncated or malformed end") from None
        except RecursionError:
            raise TraceFormatError(too_deep(self.path)) from None
        check_one_events(buf, self.path, 0, prefix=_TAIL_PREFIX)
        return tail

    def merge(self, head: RawTrace, tail: RawTrace) -> Trace:
        """The header from the fields before the events and after them (those after win); sets ``warnings``."""
        values = {name: getattr(tail, name) if getattr(tail, name) is not None else getattr(head, name) for name in HEADER_FIELDS}
        trace, self.warnings = clean_header(values, self.path)
        return trace
