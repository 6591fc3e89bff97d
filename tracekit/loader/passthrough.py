"""A trace kept as its bytes, for a writer that must pass it through unchanged (`tracekit annotate`).

The top-level object is split with msgspec into ``dict[str, msgspec.Raw]``: each value stays the bytes the file
has (no float conversion, so a ``1e400`` in a field nobody reads passes through), the bytes come from the
loader's own reader (gzip by magic bytes, the same limits, regular files only), and a trace cut short is
salvaged as the loader salvages it. Of the events only the ``pid`` field is decoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import TraceFormatError
from .decode import DEFAULT_MAX_BYTES, StreamLimits, check_one_events, mend_lone_surrogates, read_bytes, salvaged_prefix, too_deep

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_NOT_BLANK = re.compile(rb"[^ \t\r\n]")


class _Pid(msgspec.Struct):
    pid: Any = None


_PIDS = msgspec.json.Decoder(list[_Pid])


@dataclass(frozen=True, slots=True)
class TraceBytes:
    """A trace's top-level members as their original bytes; ``pids`` None when the events' pids could not be
    read; ``warnings`` say what was mended or salvaged; ``truncated``: only the complete events before a cut are
    kept (the array closed with ``]}``)."""

    members: dict[str, msgspec.Raw]
    pids: frozenset | None
    warnings: tuple[str, ...] = ()
    truncated: bool = False


def read_trace_bytes(path: str, limits: StreamLimits | int = DEFAULT_MAX_BYTES) -> TraceBytes:
    from .nsys import is_export

    if is_export(path):  # an Nsight export has no trace bytes: its loaded events, written as a Chrome trace
        from .nsys.chrome import trace_members

        members, pids = trace_members(path, limits if isinstance(limits, StreamLimits) else StreamLimits(limits))
        return TraceBytes(members, pids)
    data = read_bytes(path, limits)
    if _NOT_BLANK.search(data) is None:
        raise TraceFormatError(f"{path}: empty file; was the profiler stopped before export?")
    check_one_events(data, path, 0)
    members, warnings, truncated = _split(data, path)
    events = members.get("traceEvents")
    if events is None or bytes(memoryview(events)[:64]).lstrip()[:1] != b"[":
        raise TraceFormatError(f"{path}: no traceEvents list; is it a Chrome/Kineto trace?")
    return TraceBytes(members, _pids(events), tuple(warnings), truncated)


def _split(data: bytes | bytearray, path: str) -> tuple[dict[str, msgspec.Raw], list[str], bool]:
    """The top-level members, as the loader reads them: lone surrogate escapes mended, a truncated trace
    salvaged (each with its warning); and whether it was truncated."""
    try:
        return _TOP.decode(data), [], False
    except msgspec.ValidationError:
        raise TraceFormatError(f"{path}: top level is not an object; pass a Kineto/Chrome trace") from None
    except msgspec.DecodeError as exc:
        mended, warning = mend_lone_surrogates(data, path)
        if warning is not None:
            members, warnings, truncated = _split(mended, path)
            return members, [warning, *warnings], truncated
        prefix, _, warning = salvaged_prefix(data, path, exc)
        return _TOP.decode(prefix), [warning], True
    except RecursionError:
        raise TraceFormatError(too_deep(path)) from None


def _pids(events: msgspec.Raw) -> frozenset | None:
    try:
        return frozenset(e.pid for e in _PIDS.decode(events) if isinstance(e.pid, (int, str)))
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError: a non-object event
        return None
