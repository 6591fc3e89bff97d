"""Collective instances as a small columnar table (one row per COMM event of a rank), and the
unrecognised kernels that run on communication streams."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...model.events import EventKind, EventTable
from ...model.traceset import RankInfo
from .. import intervals as iv
from ..names import short_name

_STR = ("op", "pg_name", "pg_desc", "pg_ranks", "pg_members", "name", "dimension")
_INT = ("rank", "step", "group_size", "seq", "stream", "start_ns", "end_ns", "bytes", "hidden_ns", "src_rank", "dst_rank")
_FLOAT = ("wait_ns", "transfer_ns")  # NaN where no cross-rank match


@dataclass(frozen=True, slots=True)
class Instances:
    """Columns of equal length: the string ones are object arrays, the rest int64 (float64 for wait/transfer)."""

    columns: Mapping[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["start_ns"])

    def __repr__(self) -> str:  # the columns stay out of a notebook cell (collectives_frame() has them)
        return f"Instances({len(self):,} collective instances; columns {', '.join(self.columns)})"

    def __getitem__(self, key: str) -> np.ndarray:
        return self.columns[key]

    def with_columns(self, **cols: np.ndarray) -> Instances:
        return replace(self, columns={**self.columns, **cols})

    def select(self, mask) -> Instances:
        return Instances({k: v[mask] for k, v in self.columns.items()})

    @staticmethod
    def empty() -> Instances:
        cols = {k: np.empty(0, object) for k in _STR}
        cols.update({k: np.empty(0, np.int64) for k in _INT})
        cols.update({k: np.empty(0, np.float64) for k in _FLOAT})
        return Instances(cols)

    @staticmethod
    def concat(parts) -> Instances:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Instances.empty()
        if len(parts) == 1:  # one rank: its own arrays (read-only everywhere), not a copy of them
            return parts[0]
        return Instances({k: np.concatenate([p.columns[k] for p in parts]) for k in parts[0].columns})


def nccl_bytes(in_bytes: np.ndarray, out_bytes: np.ndarray) -> np.ndarray:
    """nccl-tests' message size: the whole buffer (all_gather's output, reduce_scatter's input); -1 where neither
    size is known (no element count, or a dtype of unknown size): unknown, never 0 bytes."""
    return np.maximum(np.maximum(in_bytes, out_bytes), -1)


def instances_from_table(table: EventTable, rank: int, k: iv.Intervals, info: RankInfo | None = None) -> Instances:
    m = table.mask_kind(EventKind.COMM)
    sub = table.select(np.flatnonzero(m))  # row numbers: one scan of the mask, not one per column
    n = len(sub)
    start, end = sub["ts_ns"].astype(np.int64), sub.end_ns.astype(np.int64)
    cols: dict[str, np.ndarray] = {
        "op": _text(sub, "coll_op_id"),
        "pg_name": _text(sub, "pg_name_id"),
        "pg_desc": _text(sub, "pg_desc_id"),
        "pg_ranks": _text(sub, "pg_ranks_id"),
        "name": _text(sub, "name_id"),
        "dimension": np.full(n, "", object),
        "pg_members": _members(sub, info or RankInfo(rank, 0)),
        "rank": np.full(n, rank, np.int64),
        "step": sub["step"].astype(np.int64),
        "group_size": sub["group_size"].astype(np.int64),
        "seq": sub["seq"].astype(np.int64),
        "stream": sub["stream"].astype(np.int64),
        "start_ns": start,
        "end_ns": end,
        "bytes": nccl_bytes(sub["in_bytes"], sub["out_bytes"]).astype(np.int64),
        "hidden_ns": iv.overlap_each(k, start, end).astype(np.int64),
        "src_rank": sub["src_rank"].astype(np.int64),
        "dst_rank": sub["dst_rank"].astype(np.int64),
        "wait_ns": np.full(n, np.nan),
        "transfer_ns": np.full(n, np.nan),
    }
    order = np.argsort(start, kind="stable")
    return Instances({key: v[order] for key, v in cols.items()})


def _members(table: EventTable, info: RankInfo) -> np.ndarray:
    """Each instance's process-group member ranks (a tuple, as the loader parsed them), one look-up per group."""
    ids = table["pg_ranks_id"]
    uniq, inverse = np.unique(ids, return_inverse=True)
    per = np.empty(len(uniq), dtype=object)
    for j, i in enumerate(uniq.tolist()):
        per[j] = info.members(table.strings[i]) if 0 <= i < len(table.strings) else ()
    return per[inverse.reshape(-1)] if len(ids) else np.empty(0, object)


def _text(table: EventTable, column: str) -> np.ndarray:
    out = table.decode(column)
    out[out == None] = ""  # noqa: E711 -- elementwise on an object array
    return out


@dataclass(frozen=True, slots=True)
class UnrecognisedKernel:
    name: str
    count: int
    total_ns: int
    streams: tuple[int, ...]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "short_name": short_name(self.name),
            "count": self.count,
            "total_us": self.total_ns / 1e3,
            "streams": list(self.streams),
        }


def unrecognised_kernels(table: EventTable, top: int = 10, comm_share: float = 0.5) -> list[UnrecognisedKernel]:
    """Compute kernels on streams where communication is at least ``comm_share`` of the kernels: on such a
    stream a kernel nobody recognised is likely communication for which a rule is missing."""
    kern = np.flatnonzero(table.mask_kind(EventKind.KERNEL))
    comm = np.flatnonzero(table.mask_kind(EventKind.COMM))
    stream = table["stream"]
    if not len(comm) or not len(kern):
        return []
    codes, _ = pd.factorize(np.concatenate([stream[comm], stream[kern]]), sort=True)
    n_comm = np.bincount(codes[: len(comm)], minlength=int(codes.max()) + 1)
    n_kern = np.bincount(codes[len(comm) :], minlength=int(codes.max()) + 1)
    hit = kern[(n_comm >= comm_share * (n_comm + n_kern))[codes[len(comm) :]]]  # kernels on such streams
    if not len(hit):
        return []
    names, inv = np.unique(table["name_id"][hit], return_inverse=True)
    counts = np.bincount(inv)
    totals = np.bincount(inv, weights=table["dur_ns"][hit]).astype(np.int64)
    out = []
    for i in np.argsort(-totals, kind="stable")[:top]:
        on = np.unique(stream[hit][inv == i])
        out.append(
            UnrecognisedKernel(table.string(int(names[i])) or "", int(counts[i]), int(totals[i]), tuple(int(s) for s in on))
        )
    return out
