"""A trace kept as its bytes, for a writer that must pass it through unchanged (`tracekit annotate`).

The top-level object is split with msgspec into ``dict[str, msgspec.Raw]``: each value stays the bytes the file
has (no float conversion, so a ``1e400`` in a field nobody reads passes through), the bytes come from the
loader's own reader (gzip by magic bytes, the same limits, regular files only), and a trace cut short is
salvaged as the loader salvages it. Of the events only the ``pid`` field is decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import TraceFormatError
from .decode import DEFAULT_MAX_BYTES, StreamLimits, read_bytes, salvaged_prefix

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])


class _Pid(msgspec.Struct):
    pid: Any = None


_PIDS = msgspec.json.Decoder(list[_Pid])


@dataclass(frozen=True, slots=True)
class TraceBytes:
    """A trace's top-level members as their original bytes; ``pids`` None when the events' pids could not be
    read; ``warnings`` say what was salvaged."""

    members: dict[str, msgspec.Raw]
    pids: frozenset | None
    warnings: tuple[str, ...] = ()


def read_trace_bytes(path: str, limits: StreamLimits | int = DEFAULT_MAX_BYTES) -> TraceBytes:
    data = read_bytes(path, limits)
    warnings: tuple[str, ...] = ()
    try:
        members = _TOP.decode(data)
    except msgspec.ValidationError:
        raise TraceFormatError(f"{path}: top level is not an object; pass a Kineto/Chrome trace") from None
    except msgspec.DecodeError as exc:
        prefix, _, warning = salvaged_prefix(data, path, exc)
        del data
        members, warnings = _TOP.decode(prefix), (warning,)
    except RecursionError:
        raise TraceFormatError(f"{path}: JSON nested too deeply to read; the file is corrupt or crafted") from None
    events = members.get("traceEvents")
    if events is None or bytes(events).lstrip()[:1] != b"[":
        raise TraceFormatError(f"{path}: no traceEvents list; is it a Chrome/Kineto trace?")
    return TraceBytes(members, _pids(events), warnings)


def _pids(events: msgspec.Raw) -> frozenset | None:
    try:
        return frozenset(e.pid for e in _PIDS.decode(events) if isinstance(e.pid, (int, str)))
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError: a non-object event
        return None
