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
from typing import Annotated, Any

import msgspec

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


Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]  # what an int64 column holds


class _Frame(msgspec.Struct):
    filename: Any = None
    line: Any = None
    name: Any = None


class Entry(msgspec.Struct, kw_only=True):
    """One ring entry as the dumps spell it; a field absent, None or (after the per-field pass) of the wrong type
    is None."""

    record_id: Int | None = None
    pg_id: Int | None = None
    process_group: tuple[str, ...] | None = None  # (name, desc); (name,) in hand-written dumps
    collective_seq_id: Int | None = None
    seq_id: Int | None = None  # the first dumps' name for collective_seq_id
    p2p_seq_id: Int | None = None
    op_id: Int | None = None
    profiling_name: str | None = None
    is_p2p: bool | None = None
    state: str | None = None
    retired: bool | None = None
    time_created_ns: Int | None = None
    time_discovered_started_ns: Int | None = None
    time_discovered_completed_ns: Int | None = None
    duration_ms: float | None = None
    timeout_ms: Int | None = None
    input_sizes: list[list[Int]] | None = None
    output_sizes: list[list[Int]] | None = None
    input_dtypes: list[str] | None = None
    output_dtypes: list[str] | None = None
    frames: list[_Frame] | None = None


_FIELDS = tuple(f.name for f in msgspec.structs.fields(Entry))


def _entry(e: Any, log: FieldLog) -> Entry | None:
    """``e`` as an Entry: in one C-level conversion when every field has its type, else field by field."""
    if not isinstance(e, Mapping):
        log.wrong("entries[]")
        return None
    try:
        return msgspec.convert(e, Entry)
    except msgspec.ValidationError:
        pass
    kept = {}
    for key in _FIELDS:
        if e.get(key) is None:
            continue
        try:
            msgspec.convert({key: e[key]}, Entry)
            kept[key] = e[key]
        except msgspec.ValidationError:
            log.wrong(key)
    return msgspec.convert(kept, Entry)


def _group(e: Entry, log: FieldLog) -> tuple[str, str]:
    g = e.process_group
    if g is None:
        return "", ""
    if not 1 <= len(g) <= 2:
        log.wrong("process_group")
        return "", ""
    return g[0], g[1] if len(g) == 2 else ""


def _int(v: int | None) -> int:
    return ABSENT if v is None else v


def _time(v: int | None) -> int:
    return v if v is not None and v > 0 else ABSENT  # 0 is how a JSON dump writes "not recorded"


def _duration_ns(v: float | None, log: FieldLog) -> int:
    if v is None:
        return ABSENT
    if not 0 <= v < 1e12:  # NaN fails too
        log.wrong("duration_ms")
        return ABSENT
    return int(round(v * 1e6))


def _frame(frames: list[_Frame] | None) -> str:
    """The first frame outside torch (the user's call), as ``file:line in name``; "" without frames."""
    for f in frames or ():
        filename, line, name = f.filename, f.line, f.name
        if not isinstance(filename, str) or any(p in filename for p in _TORCH_FRAME_PARTS):
            continue
        where = f"{filename}:{line}" if isinstance(line, int) and not isinstance(line, bool) else filename
        return f"{where} in {name}" if isinstance(name, str) and name else where
    return ""


def op_name(profiling_name: str) -> str:
    """``"nccl:all_reduce"`` -> ``"all_reduce"``; ``"gloo:all_gather"`` -> ``"all_gather"``."""
    head, sep, tail = profiling_name.partition(":")
    return (tail if sep and head.isidentifier() else profiling_name).strip()


def entry_columns(rank: int, raw: list, log: FieldLog) -> dict[str, list]:
    """The entries of one dump as the lists of :data:`tracekit.model.flight.ENTRY_COLUMNS`."""
    es = [x for x in (_entry(e, log) for e in raw) if x is not None]
    groups = [_group(e, log) for e in es]
    profiling = [e.profiling_name or "" for e in es]
    return {
        "rank": [rank] * len(es),
        "record_id": [_int(e.record_id) for e in es],
        "pg_id": [_int(e.pg_id) for e in es],
        "pg_name": [g[0] for g in groups],
        "pg_desc": [g[1] for g in groups],
        "seq": [_int(e.collective_seq_id if e.collective_seq_id is not None else e.seq_id) for e in es],
        "p2p_seq": [_int(e.p2p_seq_id) for e in es],
        "op_id": [_int(e.op_id) for e in es],
        "op": [op_name(p) for p in profiling],
        "profiling_name": profiling,
        "is_p2p": [ABSENT if e.is_p2p is None else int(e.is_p2p) for e in es],
        "state": [e.state or "" for e in es],
        "retired": [ABSENT if e.retired is None else int(e.retired) for e in es],
        "created_ns": [_time(e.time_created_ns) for e in es],
        "started_ns": [_time(e.time_discovered_started_ns) for e in es],
        "completed_ns": [_time(e.time_discovered_completed_ns) for e in es],
        "duration_ns": [_duration_ns(e.duration_ms, log) for e in es],
        "timeout_ms": [_int(e.timeout_ms) for e in es],
        "input_sizes": ["" if e.input_sizes is None else str(e.input_sizes) for e in es],
        "output_sizes": ["" if e.output_sizes is None else str(e.output_sizes) for e in es],
        "input_dtypes": ["" if e.input_dtypes is None else ",".join(e.input_dtypes) for e in es],
        "output_dtypes": ["" if e.output_dtypes is None else ",".join(e.output_dtypes) for e in es],
        "frame": [_frame(e.frames) for e in es],
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
