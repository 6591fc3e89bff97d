"""The memory timeline (issue #18, item 4): allocated and reserved bytes over time per device, from the ``[memory]``
instant events that ``profile_memory=True`` records (Addr, Bytes, Total Allocated, Total Reserved, Device Type/Id).

Why each figure is what it is:
- The curve is torch's own ``Total Allocated`` / ``Total Reserved`` after each event; the running sum of ``Bytes``
  (from the allocated bytes before the first event) is kept beside it, and every event where the two disagree is
  counted (``mismatched_totals``): a sum of deltas is the independent reading of the same curve.
- The peak of a step is the largest ``Total Allocated`` of the events in that step (the total only rises at an
  allocation, so the peak is an event).
- The allocators at a device's peak are the allocations live at that instant (an allocation and its free share an
  address; the next event at the address is its free), each attributed to the innermost host op or annotation
  that encloses it on the same thread (torch's own rule for ``self_cpu_memory_usage``) and to the outermost one
  below the ProfilerStep. Bytes live at the peak that the trace never saw allocated were allocated before the
  profiler started: ``unattributed_bytes``, so the rows and it add up to the peak.
- The points are downsampled to ``memory_points`` per device (the maximum and the last event of each bucket, so
  every peak survives), and the summary says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from ...model.events import EventKind as K
from ...model.events import EventTable, memory_device_label
from ...model.traceset import TraceSet
from ..rank_detail import detail_limit

NO_MEMORY = (
    "no [memory] events in the trace: record with profile_memory=True (`tracekit run --profile-memory`, "
    "`tracekit.profile(..., profile_memory=True)`)"
)
BEFORE = "(allocated before the trace)"
NO_OP = "(no enclosing op)"
_HOST = (K.CPU_OP, K.CPU_COMM_OP, K.ANNOTATION, K.STEP)


@dataclass(frozen=True, slots=True)
class MemoryTimelineOptions:
    memory_points: int = 1000  # points kept per device in the summary (bucket maxima and ends: peaks survive)
    memory_top: int = 10  # allocator rows listed at each device's peak


@dataclass(frozen=True, slots=True)
class DeviceMemory:
    device: str
    events: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int  # the reserved bytes at the allocation peak
    max_reserved_bytes: int
    peak_us: float  # absolute, the trace's time base (as collectives[].start_us)
    peak_step: int  # -1: outside any step
    start_allocated_bytes: int  # allocated before the first event (Total Allocated - Bytes of the first event)
    allocated_bytes: int  # Σ Bytes of the allocations
    freed_bytes: int  # Σ |Bytes| of the frees
    mismatched_totals: int  # events where Total Allocated differs from the running sum of Bytes
    unattributed_bytes: int  # live at the peak but allocated before the trace

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class RankMemory:
    rank: int
    devices: tuple[DeviceMemory, ...] = ()
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)  # step, device, peak_*_bytes, peak_us, events
    points: pd.DataFrame = field(default_factory=pd.DataFrame)  # device, t_us, allocated_bytes, reserved_bytes
    points_total: int = 0
    max_points: int = 0
    allocators: pd.DataFrame = field(default_factory=pd.DataFrame)  # device, op, top_level_op, live_bytes, ...
    reason: str = ""  # why there is no timeline

    @property
    def available(self) -> bool:
        return not self.reason

    @property
    def downsampled(self) -> bool:
        return len(self.points) < self.points_total

    def to_dict(self) -> dict:
        if not self.available:
            return {"available": False, "reason": self.reason}
        pts = [
            {
                "device": d,
                "t_us": g["t_us"].tolist(),
                "allocated_bytes": g["allocated_bytes"].tolist(),
                "reserved_bytes": g["reserved_bytes"].tolist(),
            }
            for d, g in self.points.groupby("device", sort=False)
        ]
        notes = []
        if self.downsampled:
            notes.append(
                f"points downsampled: {len(self.points)} of {self.points_total} kept (per device at most "
                f"{self.max_points}: the maximum and the last event of each bucket, so every peak stays); "
                "`--memory-points N` (analyze(memory_points=N)) sets the number"
            )
        return {
            "available": True,
            "devices": [d.to_dict() for d in self.devices],
            "steps": _records(self.steps),
            "points": pts,
            "points_total": self.points_total,
            "max_points": self.max_points,
            "downsampled": self.downsampled,
            "top_allocators": _records(self.allocators),
            "notes": notes,
        }

    # DataFrames with the JSON's column names
    def steps_frame(self) -> pd.DataFrame:
        return self.steps.copy()

    def points_frame(self) -> pd.DataFrame:
        return self.points.copy()

    def allocators_frame(self) -> pd.DataFrame:
        return self.allocators.copy()


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict("records")]


def _plain(v):
    v = v.item() if hasattr(v, "item") else v
    return None if isinstance(v, float) and v != v else v


def rank_memory(table: EventTable, rank: int, options: MemoryTimelineOptions = MemoryTimelineOptions()) -> RankMemory:
    rows = np.flatnonzero(table.mask_kind(K.MEMORY) & ((table["mem_bytes"] != -1) | (table["mem_total"] >= 0)))
    if len(rows) == 0:
        return RankMemory(rank, reason=NO_MEMORY)
    rows = rows[np.argsort(table["ts_ns"][rows], kind="stable")]  # file order within a timestamp
    inner, outer = enclosing_ops(table, rows)
    names = np.array(list(table.strings) + [NO_OP], dtype=object)
    devices, steps, points, allocs = [], [], [], []
    codes = table["mem_device"][rows]
    for code in sorted(set(codes.tolist())):
        m = codes == code
        d = _device(table, rows[m], memory_device_label(code), names[inner[m]], names[outer[m]], options)
        devices.append(d[0])
        steps.append(d[1])
        points.append(d[2])
        allocs.append(d[3])
    return RankMemory(
        rank,
        tuple(devices),
        pd.concat(steps, ignore_index=True),
        pd.concat(points, ignore_index=True),
        int(len(rows)),
        options.memory_points,
        pd.concat(allocs, ignore_index=True),
    )


def _device(t: EventTable, rows: np.ndarray, label: str, inner: np.ndarray, outer: np.ndarray, options: MemoryTimelineOptions):
    delta = np.where(t["mem_bytes"][rows] == -1, 0, t["mem_bytes"][rows])  # -1 is "absent" in the loader
    total, reserved = t["mem_total"][rows], t["mem_reserved"][rows]
    start = int(total[0] - delta[0]) if total[0] >= 0 else 0
    running = start + np.cumsum(delta)
    allocated = np.where(total >= 0, total, running)
    reserved = np.where(reserved >= 0, reserved, 0)
    ts_us = t["ts_ns"][rows] / 1e3
    p = int(np.argmax(allocated))
    step = t["step"][rows]
    live, unattributed = _live_at(t["mem_addr"][rows], delta, p, int(allocated[p]))
    dev = DeviceMemory(
        label,
        len(rows),
        int(allocated[p]),
        int(reserved[p]),
        int(reserved.max()),
        float(ts_us[p]),
        int(step[p]),
        start,
        int(delta[delta > 0].sum()),
        int(-delta[delta < 0].sum()),
        int(np.count_nonzero((total >= 0) & (total != running))),
        unattributed,
    )
    steps = pd.DataFrame({"step": step, "allocated": allocated, "reserved": reserved, "t_us": ts_us})
    steps = steps[steps["step"] >= 0]
    top = steps.groupby("step", sort=True)["allocated"].idxmax() if len(steps) else pd.Series(dtype=np.int64)
    srows = pd.DataFrame(
        {
            "step": steps["step"].loc[top].astype(np.int64).to_numpy(),
            "device": label,
            "peak_allocated_bytes": steps["allocated"].loc[top].astype(np.int64).to_numpy(),
            "peak_reserved_bytes": steps["reserved"].loc[top].astype(np.int64).to_numpy(),
            "max_reserved_bytes": steps.groupby("step", sort=True)["reserved"].max().astype(np.int64).to_numpy(),
            "peak_us": steps["t_us"].loc[top].to_numpy(),
            "events": steps.groupby("step", sort=True).size().astype(np.int64).to_numpy(),
        }
    )
    keep = downsample(allocated, options.memory_points)
    pts = pd.DataFrame(
        {
            "device": label,
            "t_us": ts_us[keep],
            "allocated_bytes": allocated[keep].astype(np.int64),
            "reserved_bytes": reserved[keep].astype(np.int64),
        }
    )
    return dev, srows, pts, _allocators(label, live, delta, inner, outer, int(allocated[p]), options.memory_top)


def _live_at(addr: np.ndarray, delta: np.ndarray, p: int, peak: int) -> tuple[np.ndarray, int]:
    """Positions of the allocations live at position ``p`` (allocated at or before it, their free after it), and
    the peak bytes they do not account for (allocated before the trace)."""
    n = len(addr)
    pos = np.arange(n)
    order = np.lexsort((pos, addr))
    freed = np.full(n, n, dtype=np.int64)  # n: never freed in the trace
    a, nxt = order[:-1], order[1:]
    pair = (addr[a] == addr[nxt]) & (delta[a] > 0) & (delta[nxt] < 0) & (addr[a] >= 0)
    freed[a[pair]] = nxt[pair]
    live = np.flatnonzero((pos <= p) & (delta > 0) & (freed > p) & (addr >= 0))
    return live, peak - int(delta[live].sum())


def _allocators(
    label: str, live: np.ndarray, delta: np.ndarray, inner: np.ndarray, outer: np.ndarray, peak: int, top: int
) -> pd.DataFrame:
    df = pd.DataFrame({"op": inner[live], "top_level_op": outer[live], "bytes": delta[live]})
    g = df.groupby(["op", "top_level_op"], sort=False)["bytes"]
    out = pd.DataFrame({"live_bytes": g.sum(), "allocations": g.size()}).reset_index()
    out = out.sort_values(["live_bytes", "op", "top_level_op"], ascending=[False, True, True], kind="stable").head(top)
    out.insert(0, "device", label)
    out["live_bytes"] = out["live_bytes"].astype(np.int64)
    out["allocations"] = out["allocations"].astype(np.int64)
    out["share"] = out["live_bytes"] / peak if peak > 0 else np.nan
    return out.reset_index(drop=True)


def downsample(values: np.ndarray, limit: int) -> np.ndarray:
    """Indices to keep: all when there are at most ``limit``; else the first and, per bucket, its maximum and its
    last index: at most ``limit`` (at least 3) in all."""
    n = len(values)
    if n <= max(limit, 3):
        return np.arange(n)
    edges = np.linspace(0, n, max(1, (limit - 1) // 2) + 1).astype(np.int64)
    keep = [edges[1:] - 1]
    starts = edges[:-1]
    keep.append(starts + np.array([int(np.argmax(values[a:b])) for a, b in zip(starts.tolist(), edges[1:].tolist())]))
    keep.append(np.array([0]))
    return np.unique(np.concatenate(keep))


def enclosing_ops(t: EventTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row in ``rows`` (sorted by time), the name ids of the innermost host op or annotation enclosing it
    on the same thread and of the outermost one below the ProfilerStep; len(strings) where none does."""
    none = len(t.strings)
    inner, outer = np.full(len(rows), none, np.int64), np.full(len(rows), none, np.int64)
    host = np.flatnonzero(t.mask_kind(*_HOST) & (t["device"] < 0))
    if len(host) == 0:
        return inner, outer
    thread = pd.factorize(pd.MultiIndex.from_arrays([t["pid"], t["stream"]]))[0]
    for th in np.unique(thread[rows]).tolist():
        ops = host[thread[host] == th]
        ops = ops[np.lexsort((-t.end_ns[ops], t["ts_ns"][ops]))]
        parent, top = _nesting(t["ts_ns"][ops], t.end_ns[ops], t["kind"][ops] == K.STEP)
        starts, ends = t["ts_ns"][ops], t.end_ns[ops]
        mine = np.flatnonzero(thread[rows] == th)
        for i, ts in zip(mine.tolist(), t["ts_ns"][rows[mine]].tolist()):
            j = int(np.searchsorted(starts, ts, side="right")) - 1
            while j >= 0 and ends[j] < ts:
                j = parent[j]
            if j >= 0:
                inner[i] = t["name_id"][ops[j]]
                outer[i] = t["name_id"][ops[top[j]]]
    return inner, outer


def _nesting(starts: np.ndarray, ends: np.ndarray, is_step: np.ndarray) -> tuple[list[int], list[int]]:
    """Parent of each op (sorted by start, longer first) and its outermost ancestor that is not a step."""
    parent, top = [-1] * len(starts), list(range(len(starts)))
    stack: list[int] = []
    for j, s in enumerate(starts.tolist()):
        while stack and ends[stack[-1]] < s:
            stack.pop()
        if stack:
            parent[j] = stack[-1]
            top[j] = j if is_step[stack[-1]] else top[stack[-1]]
        stack.append(j)
    return parent, top


def memory_timelines(traces: TraceSet, options: MemoryTimelineOptions | None = None) -> dict[int, RankMemory]:
    options = options or MemoryTimelineOptions()
    return {r: rank_memory(t, r, options) for r, t in traces}


class MemoryTimelineAnalyzer:
    """The Analyzer protocol (analyzers/registry.py): per rank, a RankMemory of the steps the analysis resolved;
    with many ranks, fewer points each (analyzers/rank_detail.py)."""

    name: ClassVar[str] = "memory_timeline"
    Options: ClassVar[type] = MemoryTimelineOptions
    needs: ClassVar[tuple[str, ...]] = ("steps",)

    def run(self, traces: TraceSet, options: MemoryTimelineOptions, inputs: Mapping = {}) -> dict[int, RankMemory]:
        if "steps" in inputs:
            traces = inputs["steps"].traces
        options = replace(options, memory_points=detail_limit(len(traces)).memory(options.memory_points))
        return memory_timelines(traces, options)
