"""Flight Recorder dumps as a typed, format-free table: what every rank's collective ring held when it was dumped.

PyTorch's process groups keep a ring of their last collectives (the Flight Recorder) and dump it per rank. The
loader (:mod:`tracekit.loader.flight`) reads the dumps, pickle or JSON, of any version; what the analyzers see is
this: one :class:`FlightEntries` table of every rank's entries (numpy columns, -1 or "" for a field the dump did
not have) and one :class:`FlightDump` header per rank, gathered with the run's expected ranks in a
:class:`FlightRun`. Nothing here knows how a dump is spelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .traceset import ProcessGroup

ABSENT = -1

# column -> numpy dtype; object columns hold str ("" = absent), int columns -1 = absent
ENTRY_COLUMNS: dict[str, np.dtype] = {
    "rank": np.dtype(np.int64),
    "record_id": np.dtype(np.int64),
    "pg_id": np.dtype(np.int64),
    "pg_name": np.dtype(object),  # process_group[0]: the group's name, the same on every member
    "pg_desc": np.dtype(object),  # process_group[1]: "default_pg", "mesh_tp", "TENSOR_MODEL_PARALLEL_GROUP", ...
    "seq": np.dtype(np.int64),  # collective_seq_id: the n-th collective of the group on this rank (from 1)
    "p2p_seq": np.dtype(np.int64),  # p2p_seq_id
    "op_id": np.dtype(np.int64),
    "op": np.dtype(object),  # profiling_name without its backend: "all_reduce", "all_gather", "send", ...
    "profiling_name": np.dtype(object),  # as recorded: "nccl:all_reduce", "gloo:all_reduce"
    "is_p2p": np.dtype(np.int8),  # 0, 1, -1 absent
    "state": np.dtype(object),  # "scheduled", "started", "completed"
    "retired": np.dtype(np.int8),
    "created_ns": np.dtype(np.int64),  # time_created_ns: the collective was enqueued (wall clock)
    "started_ns": np.dtype(np.int64),  # time_discovered_started_ns
    "completed_ns": np.dtype(np.int64),  # time_discovered_completed_ns
    "duration_ns": np.dtype(np.int64),  # duration_ms (timed by the backend: NCCL with TORCH_NCCL_ENABLE_TIMING)
    "timeout_ms": np.dtype(np.int64),
    "input_sizes": np.dtype(object),  # "[[8, 16]]"
    "output_sizes": np.dtype(object),
    "input_dtypes": np.dtype(object),  # "Float" or "Float,BFloat16"
    "output_dtypes": np.dtype(object),
    "frame": np.dtype(object),  # the first frame outside torch: "train.py:42 in step"
}
OBJECT_COLUMNS = tuple(k for k, t in ENTRY_COLUMNS.items() if t == np.dtype(object))


@dataclass(frozen=True, slots=True)
class FlightEntries:
    """Columns of equal length, one row per Flight Recorder entry of one rank, ordered by (rank, record_id)."""

    columns: Mapping[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["rank"])

    def __getitem__(self, key: str) -> np.ndarray:
        return self.columns[key]

    def select(self, mask) -> FlightEntries:
        return FlightEntries({k: v[mask] for k, v in self.columns.items()})

    @staticmethod
    def from_rows(rows: Sequence[Mapping[str, object]]) -> FlightEntries:
        """Rows with some of the columns each; a missing key is absent (-1 or "")."""
        cols: dict[str, np.ndarray] = {}
        for name, dtype in ENTRY_COLUMNS.items():
            blank: object = "" if dtype == np.dtype(object) else ABSENT
            values = [row.get(name, blank) for row in rows]
            cols[name] = np.array(values, dtype=object) if dtype == np.dtype(object) else np.array(values, dtype=dtype)
        return FlightEntries(cols)

    @staticmethod
    def from_columns(lists: Mapping[str, Sequence[object]]) -> FlightEntries:
        """Lists of equal length for every column (see ENTRY_COLUMNS)."""
        cols = {
            name: np.array(lists[name], dtype=object) if dtype == np.dtype(object) else np.array(lists[name], dtype=dtype)
            for name, dtype in ENTRY_COLUMNS.items()
        }
        return FlightEntries(cols)

    def ordered(self) -> FlightEntries:
        """Rows by (rank, record_id, created_ns): the ring's order, oldest first."""
        order = np.lexsort((self.columns["created_ns"], self.columns["record_id"], self.columns["rank"]))
        return FlightEntries({k: v[order] for k, v in self.columns.items()})

    @staticmethod
    def concat(parts: Sequence[FlightEntries]) -> FlightEntries:
        parts = [p for p in parts if len(p)]
        if not parts:
            return FlightEntries.from_rows(())
        return FlightEntries({k: np.concatenate([p.columns[k] for p in parts]) for k in ENTRY_COLUMNS})


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """A rank's ``pg_status`` line for one process group: the last collective it enqueued, started, completed
    (-1 when the dump does not say; gloo on torch 2.13 counts these in op ids and marks every one completed)."""

    pg: str
    last_enqueued: int = ABSENT
    last_started: int = ABSENT
    last_completed: int = ABSENT


@dataclass(frozen=True, slots=True)
class FlightDump:
    """What one rank's dump says besides its entries."""

    rank: int
    path: str
    form: str  # "pickle" or "json"
    version: str = ""  # the dump's own version string ("2.10")
    comm_lib_version: str = ""  # comm_lib_version / nccl_version
    process_groups: tuple[ProcessGroup, ...] = ()  # pg_config, where it names a group
    status: tuple[GroupStatus, ...] = ()
    entries: int = 0
    notes: tuple[str, ...] = ()  # fields of an unexpected type left out, an unknown version, ...


@dataclass(frozen=True, slots=True)
class FlightRun:
    """Every rank's dump of one run: the entries of all ranks, one header per rank that dumped, the ranks the run
    had (from the dumps' own group configs, ``run.json`` or the file names) and what was left out."""

    entries: FlightEntries
    dumps: tuple[FlightDump, ...]
    expected_ranks: tuple[int, ...]  # every rank of the run, as far as anything says
    manifest_groups: tuple[ProcessGroup, ...] = ()  # run.json's process groups (tracekit's collectors write them)
    group_dimensions: Mapping[str, str] = field(default_factory=dict)  # run.json: group name/desc -> dimension
    left_out: tuple[str, ...] = ()  # "PATH: why" for each dump that was refused (an unpicklable global, ...)
    left_out_ranks: tuple[int, ...] = ()  # their ranks
    warnings: tuple[str, ...] = ()
    directory: str = ""

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks that dumped."""
        return tuple(d.rank for d in self.dumps)

    @property
    def absent_ranks(self) -> tuple[int, ...]:
        """Ranks the run had that left no readable dump."""
        have = set(self.ranks)
        return tuple(r for r in self.expected_ranks if r not in have)

    def dump(self, rank: int) -> FlightDump | None:
        return next((d for d in self.dumps if d.rank == rank), None)
