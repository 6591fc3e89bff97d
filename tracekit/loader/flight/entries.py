"""A decoded Flight Recorder dump (plain dicts and lists, from either form) -> typed rows, field by field.

The one place that knows how a dump spells its fields. Every version seen is read the same way: each field is
taken when it has the expected type and left absent otherwise, and a field of the wrong type is counted in the
dump's notes (never a crash, never a guess). Spellings that differ between versions and forms:

- ``collective_seq_id`` (2.x) or ``seq_id`` (the first dumps);
- ``comm_lib_version`` (2.10) or ``nccl_version`` (before);
- ``process_group``: a tuple (pickle) or a list (JSON) of (name, desc);
- ``time_discovered_*_ns``: None in a pickle, 0 in a JSON dump, when the backend did not record it (gloo);
- ``pg_config`` values: {name, desc, ranks} with ranks as text ("[0, 1]"), or a (desc, ranks) pair;
- ``pg_status`` counters: numbers, or numbers written as text (JSON dumps).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...model.flight import ABSENT, GroupStatus
from ...model.traceset import ProcessGroup, parse_ranks

# frames of torch itself and of the interpreter's start-up, skipped to reach the user's call
_TORCH_FRAME_PARTS = ("-packages/torch/", "/torch/distributed/", "\\torch\\", "/multiprocessing/", "<string>")


class FieldLog:
    """Counts the fields left out of one dump (wrong type), for its one-line note."""

    def __init__(self) -> None:
        self.bad: dict[str, int] = {}

    def wrong(self, key: str) -> None:
        self.bad[key] = self.bad.get(key, 0) + 1

    def note(self) -> str | None:
        if not self.bad:
            return None
        parts = ", ".join(f"{k} ×{n}" for k, n in sorted(self.bad.items()))
        return f"fields of an unexpected type left out as absent: {parts}"


def _int(d: Mapping, key: str, log: FieldLog, *, positive: bool = False) -> int:
    value = d.get(key)
    if value is None:
        return ABSENT
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        log.wrong(key)
        return ABSENT
    if positive and value <= 0:  # 0 is how a JSON dump writes "not recorded" for a time
        return ABSENT
    return value


def _text(d: Mapping, key: str, log: FieldLog) -> str:
    value = d.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        log.wrong(key)
        return ""
    return value


def _flag(d: Mapping, key: str, log: FieldLog) -> int:
    value = d.get(key)
    if value is None:
        return ABSENT
    if not isinstance(value, bool):
        log.wrong(key)
        return ABSENT
    return int(value)


def _duration_ns(d: Mapping, log: FieldLog) -> int:
    value = d.get("duration_ms")
    if value is None:
        return ABSENT
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e12:  # NaN fails too
        log.wrong("duration_ms")
        return ABSENT
    return int(round(value * 1e6))


def _sizes(d: Mapping, key: str, log: FieldLog) -> str:
    """``[[8, 16], [4]]`` as that text; anything else absent."""
    value = d.get(key)
    if value is None:
        return ""
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(s, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in s) for s in value
    )
    if not ok:
        log.wrong(key)
        return ""
    return "[" + ", ".join("[" + ", ".join(str(x) for x in s) + "]" for s in value) + "]"


def _dtypes(d: Mapping, key: str, log: FieldLog) -> str:
    value = d.get(key)
    if value is None:
        return ""
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        log.wrong(key)
        return ""
    return ",".join(value)


def _group(d: Mapping, log: FieldLog) -> tuple[str, str]:
    value = d.get("process_group")
    if value is None:
        return "", ""
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 2 or not all(isinstance(x, str) for x in value):
        log.wrong("process_group")
        return "", ""
    return value[0], value[1] if len(value) == 2 else ""


def _frame(d: Mapping) -> str:
    """The first frame outside torch (the user's call), as ``file:line in name``; "" without frames."""
    frames = d.get("frames")
    if not isinstance(frames, (list, tuple)):
        return ""
    for f in frames:
        if not isinstance(f, Mapping):
            continue
        filename, line, name = f.get("filename"), f.get("line"), f.get("name")
        if not isinstance(filename, str) or any(p in filename for p in _TORCH_FRAME_PARTS):
            continue
        where = f"{filename}:{line}" if isinstance(line, int) and not isinstance(line, bool) else filename
        return f"{where} in {name}" if isinstance(name, str) and name else where
    return ""


def op_name(profiling_name: str) -> str:
    """``"nccl:all_reduce"`` -> ``"all_reduce"``; ``"gloo:all_gather"`` -> ``"all_gather"``."""
    head, sep, tail = profiling_name.partition(":")
    return (tail if sep and head.isidentifier() else profiling_name).strip()


def entry_row(rank: int, e: Any, log: FieldLog) -> dict[str, object] | None:
    """One entry as a row of :data:`tracekit.model.flight.ENTRY_COLUMNS`; None for an entry that is no dict."""
    if not isinstance(e, Mapping):
        log.wrong("entries[]")
        return None
    seq = _int(e, "collective_seq_id", log) if "collective_seq_id" in e else _int(e, "seq_id", log)
    name, desc = _group(e, log)
    profiling = _text(e, "profiling_name", log)
    return {
        "rank": rank,
        "record_id": _int(e, "record_id", log),
        "pg_id": _int(e, "pg_id", log),
        "pg_name": name,
        "pg_desc": desc,
        "seq": seq,
        "p2p_seq": _int(e, "p2p_seq_id", log),
        "op_id": _int(e, "op_id", log),
        "op": op_name(profiling),
        "profiling_name": profiling,
        "is_p2p": _flag(e, "is_p2p", log),
        "state": _text(e, "state", log),
        "retired": _flag(e, "retired", log),
        "created_ns": _int(e, "time_created_ns", log, positive=True),
        "started_ns": _int(e, "time_discovered_started_ns", log, positive=True),
        "completed_ns": _int(e, "time_discovered_completed_ns", log, positive=True),
        "duration_ns": _duration_ns(e, log),
        "timeout_ms": _int(e, "timeout_ms", log),
        "input_sizes": _sizes(e, "input_sizes", log),
        "output_sizes": _sizes(e, "output_sizes", log),
        "input_dtypes": _dtypes(e, "input_dtypes", log),
        "output_dtypes": _dtypes(e, "output_dtypes", log),
        "frame": _frame(e),
    }


def process_groups(dump: Mapping, log: FieldLog) -> tuple[ProcessGroup, ...]:
    """``pg_config`` entries that name a group. gloo on torch 2.13 writes one entry with an empty name (and
    sometimes the world's ranks): it names no group and is left out."""
    config = dump.get("pg_config")
    if config is None:
        return ()
    if not isinstance(config, Mapping):
        log.wrong("pg_config")
        return ()
    out = []
    for key, value in config.items():
        if isinstance(value, Mapping):
            name, desc, ranks = value.get("name", key), value.get("desc", ""), value.get("ranks", "")
        elif isinstance(value, (list, tuple)) and len(value) == 2:
            name, desc, ranks = key, value[0], value[1]
        else:
            log.wrong("pg_config")
            continue
        members = parse_ranks(ranks) if isinstance(ranks, str) else _rank_list(ranks)
        name = str(name) if isinstance(name, (str, int)) and not isinstance(name, bool) else ""
        if not name:
            continue
        out.append(ProcessGroup(name, desc if isinstance(desc, str) else "", members, len(members)))
    return tuple(out)


def _rank_list(value: object) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value):
        return tuple(value)
    return ()


def _counter(value: object) -> int:
    if isinstance(value, bool):
        return ABSENT
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
        return int(value)
    return ABSENT


def group_status(dump: Mapping, log: FieldLog) -> tuple[GroupStatus, ...]:
    status = dump.get("pg_status")
    if status is None:
        return ()
    if not isinstance(status, Mapping):
        log.wrong("pg_status")
        return ()
    out = []
    for key, value in status.items():
        if not isinstance(value, Mapping):
            log.wrong("pg_status")
            continue
        out.append(
            GroupStatus(
                str(key),
                _counter(value.get("last_enqueued_collective")),
                _counter(value.get("last_started_collective")),
                _counter(value.get("last_completed_collective")),
            )
        )
    return tuple(out)


def header_text(dump: Mapping, keys: tuple[str, ...], log: FieldLog) -> str:
    """The first of ``keys`` present as text (a number is written as text: "2.10" may come as 2.1 from a hand)."""
    for key in keys:
        value = dump.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if value is not None:
            log.wrong(key)
    return ""
