"""Kernel breakdown (per name, short name and class) and the exclusive partition of the device-busy time.

Over the device activities a step range launched (device_scope.py). Per group: count, total, mean, p50/p95
(linear interpolation), max, and ``share`` = total / busy, where busy = |union of the range's compute,
communication and memory activities| (sync rows are listed but are not busy time, as in overlap.py). Shares of
concurrent kernels add up to more than 1; the busy partition does not overlap: every ns of the busy time is in
exactly one of compute, communication, memory or one of their overlaps (HTA's "COMPUTATION overlapping
COMMUNICATION", ...), so the parts add up to busy exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...model.events import EventKind, EventTable
from ..arrays import group_bounds, group_percentiles
from ..names import distinct_short_names
from .device_scope import Scope
from .kernel_classes import ClassRuleSet

_STAT_COLUMNS = ("count", "total_us", "mean_us", "p50_us", "p95_us", "max_us", "share")


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A breakdown that has no meaning for this rank (a CPU-only run, a trace without launch rows)."""

    reason: str

    def to_dict(self) -> dict:
        return {"available": False, "reason": self.reason}

    def to_frame(self) -> pd.DataFrame:
        df = pd.DataFrame()
        df.attrs["reason"] = self.reason
        return df


@dataclass(frozen=True, slots=True)
class KernelStats:
    key: tuple[tuple[str, str], ...]  # (column, value) pairs: ("name", ...), ("short_name", ...), ("class", ...)
    count: int
    total_ns: int
    mean_ns: float
    p50_ns: float
    p95_ns: float
    max_ns: int
    share: float

    def to_dict(self) -> dict:
        d: dict = dict(self.key)
        d.update(
            count=self.count,
            total_us=self.total_ns / 1e3,
            mean_us=self.mean_ns / 1e3,
            p50_us=self.p50_ns / 1e3,
            p95_us=self.p95_ns / 1e3,
            max_us=self.max_ns / 1e3,
            share=self.share,
        )
        return d


@dataclass(frozen=True, slots=True)
class KernelBreakdown:
    rank: int
    busy_ns: int
    rows: tuple[KernelStats, ...]  # one per full name, largest total first
    classes: tuple[KernelStats, ...]  # one per class
    short_names: tuple[KernelStats, ...]  # one per short name

    def to_dict(self) -> list[dict]:
        return [r.to_dict() for r in self.rows]

    def to_frame(self, by: str = "name") -> pd.DataFrame:
        """``by``: "name" (the JSON rows), "short_name" or "class"."""
        rows = {"name": self.rows, "short_name": self.short_names, "class": self.classes}[by]
        cols = {"name": ("name", "short_name", "class"), "short_name": ("short_name", "class"), "class": ("class",)}[by]
        return pd.DataFrame([r.to_dict() for r in rows], columns=list(cols + _STAT_COLUMNS))


PARTS = {
    1: "compute",
    2: "communication",
    4: "memory",
    3: "compute_overlapping_communication",
    5: "compute_overlapping_memory",
    6: "communication_overlapping_memory",
    7: "compute_overlapping_communication_overlapping_memory",
}


@dataclass(frozen=True, slots=True)
class BusyPartition:
    rank: int
    busy_ns: int
    parts_ns: tuple[tuple[str, int], ...]  # (part, ns) in PARTS order; they add up to busy_ns

    def part_ns(self, part: str) -> int:
        return dict(self.parts_ns)[part]

    def to_dict(self) -> dict:
        return {
            "busy_us": self.busy_ns / 1e3,
            "parts": [
                {"part": p, "us": ns / 1e3, "share": ns / self.busy_ns if self.busy_ns else 0.0} for p, ns in self.parts_ns
            ],
        }

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.to_dict()["parts"], columns=["part", "us", "share"])


def kernel_breakdown(sc: Scope, rank: int, rules: ClassRuleSet) -> tuple[KernelBreakdown, BusyPartition]:
    rows = sc.rows
    dur = sc.table["dur_ns"][rows]
    partition = busy_partition(sc, rank)
    busy = partition.busy_ns
    names, shorts, classes, inv = label_codes(sc.table, rows, rules)
    order = np.argsort(dur)  # once: each grouping below keeps this order inside its groups
    inv, dur = inv[order], dur[order]
    by_name = _aggregate(("name", "short_name", "class"), list(zip(names, shorts, classes)), inv, dur, busy)
    by_short = _aggregate(("short_name", "class"), list(zip(shorts, classes)), inv, dur, busy)
    by_class = _aggregate(("class",), [(c,) for c in classes], inv, dur, busy)
    return KernelBreakdown(rank, busy, by_name, by_class, by_short), partition


def label_codes(t: EventTable, rows: np.ndarray, rules: ClassRuleSet) -> tuple[list[str], list[str], list[str], np.ndarray]:
    """(names, short names, classes) of each unique (name, kind) pair of ``rows``, and each row's pair index.
    Names and classes are worked out once per pair, never per row; the short names are labels that keep two
    different kernels of the range apart (``names.distinct_short_names``)."""
    if len(rows) == 0:
        return [], [], [], np.zeros(0, np.intp)
    kind = t["kind"][rows].astype(np.int64)
    width = int(kind.max()) + 1
    pair = (np.maximum(t["name_id"][rows], -1).astype(np.int64) + 1) * width + kind
    uniq, inv = _distinct(pair)
    names = [t.strings[p // width - 1] if p // width >= 1 else "" for p in uniq.tolist()]
    classes = rules.classify(names, [p % width for p in uniq.tolist()])
    shorts = distinct_short_names(names)
    return names, shorts, classes, inv


def _distinct(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)`` for non-negative codes: by a lookup table when the codes are
    dense enough (no sort of every row), else numpy's."""
    top = int(codes.max())
    if top > 4 * len(codes) + 65536:
        return np.unique(codes, return_inverse=True)
    present = np.zeros(top + 1, bool)
    present[codes] = True
    return np.flatnonzero(present), (np.cumsum(present) - 1)[codes]


def name_labels(t: EventTable, rows: np.ndarray, rules: ClassRuleSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(name, short name, class) of each row as object arrays; names and classes are worked out once per unique
    (name, kind) pair."""
    names, shorts, classes, inv = label_codes(t, rows, rules)
    return (np.array(names, dtype=object)[inv], np.array(shorts, dtype=object)[inv], np.array(classes, dtype=object)[inv])


def _aggregate(
    columns: tuple[str, ...], labels: list[tuple[str, ...]], inv: np.ndarray, dur: np.ndarray, busy_ns: int
) -> tuple[KernelStats, ...]:
    """Stats per distinct label: ``labels`` per (name, kind) pair, ``inv`` each row's pair, ``dur`` sorted."""
    if len(dur) == 0:
        return ()
    groups: dict[tuple[str, ...], int] = {}
    code = np.array([groups.setdefault(lab, len(groups)) for lab in labels], np.int64)
    code = code.astype(np.int16 if len(groups) < 2**15 else np.int64)[inv]  # 16 bits: numpy's stable sort is a radix
    o = np.argsort(code, kind="stable")  # by group, durations still ascending inside each
    code, d = code[o], dur[o]
    starts, counts = group_bounds(code)
    totals = np.add.reduceat(d, starts).tolist()
    p50 = group_percentiles(d, starts, counts, 50).tolist()
    p95 = group_percentiles(d, starts, counts, 95).tolist()
    maxes = d[starts + counts - 1].tolist()
    out = []
    for i, label in enumerate(groups):
        n, total = int(counts[i]), int(totals[i])
        out.append(
            KernelStats(
                tuple(zip(columns, label)),
                n,
                total,
                total / n,
                p50[i],
                p95[i],
                int(maxes[i]),
                total / busy_ns if busy_ns else 0.0,
            )
        )
    out.sort(key=lambda s: (-s.total_ns, s.key))
    return tuple(out)


def busy_partition(sc: Scope, rank: int) -> BusyPartition:
    """Sweep the boundaries of the three unions once; each elementary segment has a coverage bit mask."""
    t, rows = sc.table, sc.rows
    kinds = t["kind"][rows]
    cats = np.zeros(len(rows), np.int64)
    cats[kinds == int(EventKind.KERNEL)] = 1
    cats[kinds == int(EventKind.COMM)] = 2
    cats[(kinds == int(EventKind.MEMCPY)) | (kinds == int(EventKind.MEMSET))] = 4
    keep = (cats > 0) & (t["dur_ns"][rows] > 0)
    s, e, bit = t["ts_ns"][rows][keep], t.end_ns[rows][keep], cats[keep]
    totals = dict.fromkeys(PARTS, 0)
    if len(s):
        pts = np.concatenate([s, e])
        order = np.argsort(pts, kind="stable")
        pts = pts[order]
        counts = np.zeros((len(pts), 3), np.int64)
        sign = np.concatenate([np.ones(len(s), np.int64), -np.ones(len(e), np.int64)])[order]
        which = np.log2(np.concatenate([bit, bit])[order]).astype(np.int64)
        counts[np.arange(len(pts)), which] = sign
        cover = np.cumsum(counts, axis=0)[:-1] > 0
        mask = cover[:, 0] * 1 + cover[:, 1] * 2 + cover[:, 2] * 4
        seg = np.diff(pts)
        sums = np.zeros(8, np.int64)
        np.add.at(sums, mask, seg)
        for m in PARTS:
            totals[m] = int(sums[m])
    parts = tuple((PARTS[m], totals[m]) for m in PARTS)
    return BusyPartition(rank, sum(totals.values()), parts)


__all__ = [
    "BusyPartition",
    "KernelBreakdown",
    "KernelStats",
    "Unavailable",
    "busy_partition",
    "kernel_breakdown",
    "label_codes",
    "name_labels",
]
