"""The columnar event table: one per rank, a fixed schema of numpy columns.

Times are absolute int64 nanoseconds (``baseTimeNanoseconds`` applied when the trace has it).
Strings (names, categories, process-group fields, dtypes, ops) are interned per table in ``strings``;
string columns hold int32 ids into it, -1 for "absent". Integer columns use -1 for "absent".
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .columns import Columns

SCHEMA_VERSION = 5  # 2: event kinds and communication from evidence (every generation); 3: truncation in RankInfo;
# 4: the [memory] address, reserved bytes and device; 5: XPU/PrivateUse1/1.8 launch and operator categories, tids


class EventKind(enum.IntEnum):
    """What an event is, for the analyzers. Only the loader decides this."""

    KERNEL = 0  # device compute kernel (anything that is not communication, copy, set or sync)
    COMM = 1  # communication interval: NCCL/RCCL/... kernel, or a gloo worker-thread span on CPU runs
    MEMCPY = 2
    MEMSET = 3
    SYNC = 4  # device sync / stream wait, and tracekit's Work.wait annotations on CPU runs
    CPU_OP = 5  # host operator that counts as compute on CPU-only runs
    CPU_COMM_OP = 6  # host side of a collective (c10d::*, record_param_comms, ops on gloo worker threads)
    ANNOTATION = 7  # user annotation (record_function) and GPU user annotations
    RUNTIME = 8  # cuda/hip runtime and driver calls (kernel launches)
    STEP = 9  # ProfilerStep#N
    MEMORY = 10  # [memory] instant events of profile_memory
    OTHER = 11


DEVICE_KINDS = (EventKind.KERNEL, EventKind.COMM, EventKind.MEMCPY, EventKind.MEMSET, EventKind.SYNC)

# column name -> numpy dtype. Order is the schema order (also in Parquet).
COLUMNS: dict[str, np.dtype] = {
    "ts_ns": np.dtype(np.int64),
    "dur_ns": np.dtype(np.int64),
    "kind": np.dtype(np.int8),
    "device": np.dtype(np.int16),  # -1 for host events
    "pid": np.dtype(np.int64),
    "stream": np.dtype(np.int64),  # device stream for device events, thread id for host events
    "name_id": np.dtype(np.int32),
    "cat_id": np.dtype(np.int32),
    "correlation": np.dtype(np.int64),
    "external_id": np.dtype(np.int64),
    "step": np.dtype(np.int32),  # ProfilerStep index, -1 outside any step
    # collective columns (kernel args, or the linked record_param_comms / tracekit annotation)
    "coll_op_id": np.dtype(np.int32),  # normalised op: all_reduce, all_gather, reduce_scatter, ...
    "pg_name_id": np.dtype(np.int32),
    "pg_desc_id": np.dtype(np.int32),
    "pg_ranks_id": np.dtype(np.int32),  # e.g. "[0, 1]"
    "group_size": np.dtype(np.int32),
    "dtype_id": np.dtype(np.int32),
    "in_nelems": np.dtype(np.int64),
    "out_nelems": np.dtype(np.int64),
    "in_bytes": np.dtype(np.int64),
    "out_bytes": np.dtype(np.int64),
    "in_split_id": np.dtype(np.int32),
    "out_split_id": np.dtype(np.int32),
    "seq": np.dtype(np.int64),
    "src_rank": np.dtype(np.int32),
    "dst_rank": np.dtype(np.int32),
    # memory columns ([memory] events) and copy sizes
    "mem_bytes": np.dtype(np.int64),  # [memory] Bytes (signed delta), memcpy/memset bytes
    "mem_total": np.dtype(np.int64),  # [memory] Total Allocated
    "mem_reserved": np.dtype(np.int64),  # [memory] Total Reserved
    "mem_addr": np.dtype(np.int64),  # [memory] Addr (an allocation and its free share it)
    "mem_device": np.dtype(np.int16),  # [memory] Device Type * 256 + Device Id + 1 (memory_device_label)
}

STRING_COLUMNS = tuple(c for c in COLUMNS if c.endswith("_id") and c != "external_id")
ABSENT = -1


@dataclass(frozen=True, slots=True)
class EventTable:
    """Columns of equal length plus the interned strings they point into. Immutable by convention:
    operations return new tables; columns are never written in place after construction."""

    columns: Mapping[str, np.ndarray]
    strings: tuple[str, ...]
    _index: Mapping[str, int] = field(default=None, repr=False, compare=False)  # type: ignore[arg-type]
    _memo: dict = field(default=None, repr=False, compare=False)  # type: ignore[arg-type]  # derived columns

    def __post_init__(self) -> None:
        n = None
        peek = self.columns.peek if isinstance(self.columns, Columns) else self.columns.get  # sparse: not made dense
        for name, dtype in COLUMNS.items():
            col = peek(name)
            if col is None:
                raise ValueError(f"EventTable: missing column {name!r}")
            if col.dtype != dtype:
                raise ValueError(f"EventTable: column {name!r} is {col.dtype}, expected {dtype}")
            if n is None:
                n = len(col)
            elif len(col) != n:
                raise ValueError(f"EventTable: column {name!r} has {len(col)} rows, expected {n}")
        if self._index is None:
            object.__setattr__(self, "_index", {s: i for i, s in enumerate(self.strings)})
        object.__setattr__(self, "_memo", {})

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> EventTable:
        return cls({k: np.empty(0, dtype=d) for k, d in COLUMNS.items()}, ())

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> EventTable:
        """Build a table from dicts (tests and small synthetic tables). String-valued keys are given
        without the ``_id`` suffix (``name``, ``cat``, ``coll_op``, ``pg_name``, ...); ``kind`` may be
        an EventKind or its name."""
        rows = list(rows)
        strings: dict[str, int] = {}
        cols = {k: np.full(len(rows), _default(k), dtype=d) for k, d in COLUMNS.items()}
        for i, row in enumerate(rows):
            for key, value in row.items():
                if value is None:
                    continue
                if key + "_id" in STRING_COLUMNS:
                    cols[key + "_id"][i] = strings.setdefault(str(value), len(strings))
                elif key == "kind":
                    cols["kind"][i] = int(EventKind[value] if isinstance(value, str) else value)
                elif key in COLUMNS:
                    cols[key][i] = value
                else:
                    raise KeyError(f"unknown EventTable field {key!r}")
        return cls(cols, tuple(strings))

    # -- notebooks ------------------------------------------------------------------------------
    def _kind_counts(self) -> list[tuple[str, int]]:
        counts = np.bincount(self.columns["kind"].astype(np.int64) & 0xFF, minlength=len(EventKind))
        return [
            (EventKind(k).name, int(counts[k])) for k in np.argsort(-counts, kind="stable") if k < len(EventKind) and counts[k]
        ]

    def _steps(self) -> int:
        return int(np.count_nonzero(self.mask_kind(EventKind.STEP)))

    def __repr__(self) -> str:
        """``EventTable(24,369 events, 3 steps, 1,234 strings; KERNEL 2,700, CPU_OP 14,298, ...)``: counts only."""
        from .display import grouped

        kinds = ", ".join(f"{k} {grouped(n)}" for k, n in self._kind_counts()[:6])
        return f"EventTable({grouped(len(self))} events, {self._steps()} steps, {grouped(len(self.strings))} strings; {kinds})"

    def _repr_html_(self) -> str:
        from .display import grouped, html_table

        rows = [(k, grouped(n)) for k, n in self._kind_counts()]
        caption = f"EventTable: {grouped(len(self))} events, {self._steps()} steps (to_pandas() for the rows)"
        return html_table(caption, ("kind", "events"), rows)

    # -- access ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.columns["ts_ns"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def end_ns(self) -> np.ndarray:
        """ts_ns + dur_ns, computed once per table (read-only: columns are never written in place)."""
        end = self._memo.get("end_ns")
        if end is None:
            end = self.columns["ts_ns"] + self.columns["dur_ns"]
            end.flags.writeable = False
            self._memo["end_ns"] = end
        return end

    def string_id(self, text: str) -> int:
        """The id of ``text`` in this table, or -1 if it never occurs."""
        return self._index.get(text, ABSENT)

    def string(self, sid: int) -> str | None:
        return None if sid < 0 else self.strings[sid]

    def decode(self, column: str) -> np.ndarray:
        """A string column as an object array of str (None where absent)."""
        lookup = np.array(list(self.strings) + [None], dtype=object)
        ids = self.columns[column]
        return lookup[np.where(ids < 0, len(self.strings), ids)]

    def mask_kind(self, *kinds: EventKind) -> np.ndarray:
        kind = self.columns["kind"]
        if len(kinds) == 1:
            return kind == np.int8(kinds[0])
        lut = np.zeros(256, dtype=bool)  # a lookup per row: np.isin would sort the column
        lut[np.array([int(k) for k in kinds], dtype=np.int64) & 0xFF] = True
        return lut[kind.view(np.uint8)]

    def select(self, mask_or_index: np.ndarray) -> EventTable:
        """Rows by boolean mask or integer index; strings are shared, not compacted."""
        if isinstance(self.columns, Columns):  # sparse columns stay sparse (model/columns.py)
            return EventTable(self.columns.take(mask_or_index), self.strings, self._index)
        return EventTable({k: v[mask_or_index] for k, v in self.columns.items()}, self.strings, self._index)

    def with_columns(self, **updates: np.ndarray) -> EventTable:
        new = {key: np.asarray(value, dtype=COLUMNS[key]) for key, value in updates.items()}
        if isinstance(self.columns, Columns):
            return EventTable(self.columns.replace(new), self.strings, self._index)
        return EventTable({**self.columns, **new}, self.strings, self._index)

    def to_pandas(self):
        """A DataFrame with string columns decoded (for users and notebooks; analyzers use numpy)."""
        import pandas as pd

        data = {}
        for key in COLUMNS:
            if key in STRING_COLUMNS:
                data[key[:-3]] = self.decode(key)
            else:
                data[key] = self.columns[key]
        df = pd.DataFrame(data)
        df["kind"] = pd.Categorical.from_codes(df["kind"].astype(int), [k.name for k in EventKind])
        return df


MEMORY_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 20: "privateuse1"}  # c10::DeviceType


def memory_device_code(device_type: int, device_id: int) -> int:
    """The ``mem_device`` code of a [memory] event (-1 when the event does not say; ids beyond 254 are not real)."""
    if not (0 <= device_type < 127 and -1 <= device_id < 255):
        return ABSENT
    return device_type * 256 + device_id + 1


def memory_device_label(code: int) -> str:
    """``cpu``, ``cuda:1``, ... for a ``mem_device`` code; ``unknown`` for -1."""
    if code < 0:
        return "unknown"
    kind, dev = divmod(int(code), 256)
    name = MEMORY_DEVICE_TYPES.get(kind, f"device_type{kind}")
    return name if dev == 0 else f"{name}:{dev - 1}"


def _default(column: str) -> int:
    return 0 if column in ("ts_ns", "dur_ns", "kind") else ABSENT
