"""A complete trace with a corrupt byte in it: told apart from a truncated one, and read around.

msgspec says "Input data was truncated" when the text stops inside the document (a killed process): that is
``decode.salvage_truncated``'s case. Any other decode error -- an invalid UTF-8 byte, a digit turned into a letter,
a lost quote -- lies at a position (``(byte N)``; for UTF-8 the first byte that does not decode) in a file that goes
on past it. Before, both read as "truncated at byte N ... the process was probably killed" and every event after
the bad byte was lost. Here the event holding the bad byte is cut out at the event boundaries on either side, the
rest is decoded (the events before it; after it the rest of the array, with the header fields Kineto writes after
the events), and each event cut out is counted, once, as dropped, so the steps it lay in are marked incomplete.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import TraceFormatError

_UNTYPED = msgspec.json.Decoder(float_hook=float)
_AT = re.compile(r"\(byte (\d+)\)")
# an event boundary: one event's closing brace, a comma, the next event's opening brace and its first key's quote
_BOUNDARY = re.compile(rb'\}[ \t\r\n]*,[ \t\r\n]*(\{)[ \t\r\n]*"')
_TS = re.compile(rb'"ts"[ \t\r\n]*:[ \t\r\n]*(-?[0-9][0-9.eE+-]{0,30})')
_CORR = re.compile(rb'"correlation"[ \t\r\n]*:[ \t\r\n]*([0-9]{1,18})[ \t\r\n]*[,}]')
_OPEN = b'{"traceEvents":['
MAX_SPOTS = 64  # corrupt places read around in one file; past this it is not a few bad bytes
_TRIES = 4  # boundaries tried on each side (one inside a nested object or a string does not decode)


def is_truncation(exc: Exception) -> bool:
    return "truncated" in str(exc)


def error_at(data: bytes | bytearray, exc: Exception) -> int | None:
    """Where a decode error lies: msgspec's ``(byte N)``, or for invalid UTF-8 the first byte that does not decode
    (msgspec does not say where)."""
    m = _AT.search(str(exc))
    if m:
        return int(m.group(1))
    if "UTF-8" in str(exc):
        try:
            codecs.utf_8_decode(bytes(data), "strict", True)
        except UnicodeDecodeError as bad:
            return bad.start
    return None


@dataclass
class ReadAround:
    """What ``read_around`` made of the file: the document (untyped builtins), the places of the events cut out
    ((ts as written, correlation or -1) each), the corrupt offsets, and whether the file is also cut short."""

    doc: dict
    cut: list[tuple[Any, int]] = field(default_factory=list)
    spots: list[int] = field(default_factory=list)
    truncated: bool = False  # the rest after the last corrupt place is cut short too (salvaged as such)

    def warning(self, path: str) -> str:
        where = ", ".join(map(str, self.spots[:5])) + (" ..." if len(self.spots) > 5 else "")
        cut_short = "; the file is also cut short at its end" if self.truncated else ""
        return (
            f"{path}: corrupt bytes at byte {where}, in a file that goes on past them (not a truncation): dropped the "
            f"{len(self.cut)} events holding them and kept the other {len(self.doc['traceEvents'])}; the steps they lay "
            f"in are marked incomplete (re-copy the trace if you can){cut_short}"
        )


def read_around(data: bytes | bytearray, path: str, exc: Exception) -> ReadAround:
    """The trace read around each corrupt place (see the module). Raises TraceFormatError naming the byte where no
    event boundary lies near it, or past MAX_SPOTS places."""
    data = bytes(data)
    start, at = data.find(b'"traceEvents"'), error_at(data, exc)
    if start < 0 or at is None or at <= start:
        raise TraceFormatError(f"{path}: not valid JSON ({exc}); is it a Kineto trace?")
    head, pos = _before(data, start, at, path, exc)
    out = ReadAround({k: v for k, v in head.items() if k != "traceEvents"})
    events = list(head.get("traceEvents") or [])
    while True:
        out.spots.append(at)
        if len(out.spots) > MAX_SPOTS:
            raise TraceFormatError(f"{path}: corrupt in more than {MAX_SPOTS} places ({exc}); re-copy or re-export the trace")
        nxt, tail, more, out.truncated = _after(data, pos, at, path, exc)
        out.cut += _places(data[pos:nxt])
        if tail is not None:  # the rest decoded (or was salvaged as cut short)
            events += tail.get("traceEvents") or []
            out.doc.update((k, v) for k, v in tail.items() if k != "traceEvents")
            break
        # the rest holds another bad byte: keep the events up to it, then read around it
        assert more is not None
        piece = _OPEN + data[nxt:]
        bad = error_at(piece, more)
        if bad is None or bad <= len(_OPEN):
            raise TraceFormatError(f"{path}: not valid JSON ({more}); re-copy or re-export the trace")
        sub, sub_pos = _before(piece, 0, bad, path, more)
        events += sub.get("traceEvents") or []
        pos, at = nxt + sub_pos - len(_OPEN), nxt + bad - len(_OPEN)
    out.doc["traceEvents"] = events
    return out


def _before(buf: bytes, start: int, at: int, path: str, exc: Exception) -> tuple[dict, int]:
    """The document before the event holding byte ``at`` (closed with ``]}``), and where that event starts."""
    boundaries = list(_BOUNDARY.finditer(buf, start, at))[-_TRIES:]
    for m in reversed(boundaries):
        try:
            doc = _UNTYPED.decode(buf[: m.start() + 1] + b"]}")
        except msgspec.DecodeError:
            continue
        if isinstance(doc, dict):
            return doc, m.start(1)
    body = buf.find(b"[", start)
    if not boundaries and 0 <= body < at:  # the bad byte lies in the first event: nothing before it
        try:
            doc = _UNTYPED.decode(buf[: body + 1] + b"]}")
            if isinstance(doc, dict):
                return doc, body + 1
        except msgspec.DecodeError:
            pass
    raise TraceFormatError(f"{path}: not valid JSON ({exc}) and no event boundary before byte {at}; re-copy the trace")


def _after(data: bytes, pos: int, at: int, path: str, exc: Exception):
    """The first event boundary after byte ``at`` from which the rest of the array decodes: (its offset, the rest
    as a document, None, whether the rest was cut short and salvaged); or (offset, None, the decode error, False)
    when the rest holds another bad byte."""
    for m in list(_BOUNDARY.finditer(data, max(at, pos)))[:_TRIES]:
        nxt = m.start(1)
        piece = _OPEN + data[nxt:]
        try:
            doc = _UNTYPED.decode(piece)
        except msgspec.DecodeError as more:
            if is_truncation(more):  # corrupt and cut short too: the rest salvaged as a truncated file is
                _, doc, _ = salvaged_prefix(piece, path, more)
                return nxt, doc, None, True
            if (error_at(piece, more) or 0) > len(_OPEN) + 1:
                return nxt, None, more, False
            continue
        if isinstance(doc, dict):
            return nxt, doc, None, False
    raise TraceFormatError(f"{path}: not valid JSON ({exc}) and no event boundary after byte {at}; re-copy the trace")


def _places(cut: bytes) -> list[tuple[Any, int]]:
    """(ts as written, correlation id or -1) of each event in the cut-out bytes, where the text still says them."""
    bounds = [0] + [m.start(1) for m in _BOUNDARY.finditer(cut)] + [len(cut)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        text = cut[a:b]
        ts, corr = _TS.search(text), _CORR.search(text)
        try:
            t: Any = float(ts.group(1)) if ts else None
        except ValueError:
            t = None
        out.append((t, int(corr.group(1)) if corr else -1))
    return out


def salvaged_prefix(data: bytes | bytearray, path: str, exc: Exception) -> tuple[bytes, Any, str]:
    """A trace cut short (killed process, full disk): the document made of every complete event before the cut
    (the bytes up to the last event that closes cleanly, then ``]}``), the same decoded, and the warning to give."""
    start = data.find(b'"traceEvents"')
    if start < 0:
        raise TraceFormatError(f"{path}: not valid JSON ({exc}); is it a Kineto trace?") from None
    cut = len(data)
    for _ in range(8):  # the last few event boundaries; the first that closes cleanly wins
        cut = data.rfind(b"}", start, cut)
        if cut < 0:
            break
        candidate = bytes(data[: cut + 1]) + b"]}"
        try:
            obj = _UNTYPED.decode(candidate)
        except msgspec.DecodeError:
            continue
        events = obj.get("traceEvents") if isinstance(obj, dict) else None
        if not isinstance(events, list) or not events:
            break
        return (
            candidate,
            obj,
            (
                f"{path}: truncated at byte {len(data):,}: the file ends mid-event, so the profiler was stopped while "
                f"it wrote (a killed process, a full disk); kept the {len(events):,} complete events before the cut, "
                "lost every event it had still to write (a cut file does not say how many: the summary compares "
                "the rank with whole ones where it can); to get the whole trace, let the export finish"
            ),
        )
    raise TraceFormatError(f"{path}: not valid JSON and no complete event could be salvaged ({exc})") from None
