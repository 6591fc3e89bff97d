"""Device idle time and its causes, per step window, for the device and for each stream.

Idle = |W| − |busy ∩ W| (busy = the union of all kernels, communication, memcpy and memset, as overlap.py), for
the device, or with the stream's own activities for a stream. Each activity i was launched at L_i (the end of
the runtime call with its correlation id: on the real traces in tests/data fewer than 0.5 % of the kernels start
before their launch call returns; HTA takes the call's start) and started at s_i; while L_i ≤ t < s_i its launch is
*pending*.
At an idle instant t:

- **host_wait**: no launch is pending (the next kernel's launch had not happened yet: the host is behind);
- **dependency_wait**: a launch is pending and the activity was held by a dependency: a device sync row
  (``cuda_sync``: stream wait event) on its stream in the gap, or it started within ``slack_ns`` after an
  activity on another stream ended, that end falling after both its launch and its stream's previous activity
  (it waited for that stream). The held interval is [max(L_i, previous end on its stream), s_i);
- **other**: a launch is pending with no such evidence (launch latency, a wait the trace does not show), or
  the activity has no launch row (its gap since the previous activity on its stream is unknown).

Each part is union arithmetic in ns: host = |W \\ (busy ∪ pending ∪ unknown)|, dependency = |(held \\ busy) ∩ W|,
other = idle − host − dependency, so the three add up to the idle time exactly. A step is **host-bound** when
host_wait / wall ≥ ``host_bound_share`` (0.5: the device waits for the host for most of the step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...model.events import EventKind, EventTable
from .. import intervals as iv
from .device_scope import BUSY_KINDS, Scope, launch_rows

_FIELDS = ("wall_ns", "idle_ns", "host_wait_ns", "dependency_wait_ns", "other_ns")


@dataclass(frozen=True, slots=True)
class IdleRow:
    step: int | None  # None: over the whole step range
    stream: int | None  # None: the device (all streams)
    wall_ns: int
    idle_ns: int
    host_wait_ns: int
    dependency_wait_ns: int
    other_ns: int
    host_bound_share: float = 0.5

    @property
    def host_wait_share(self) -> float:
        return self.host_wait_ns / self.wall_ns if self.wall_ns else 0.0

    @property
    def host_bound(self) -> bool:
        return self.wall_ns > 0 and self.host_wait_share >= self.host_bound_share

    def to_dict(self) -> dict:
        d: dict = {}
        if self.step is not None:
            d["step"] = self.step
        if self.stream is not None:
            d["stream"] = self.stream
        for f in _FIELDS:
            d[f[:-3] + "_us"] = getattr(self, f) / 1e3
        d["host_wait_share"] = self.host_wait_share
        d["host_bound"] = self.host_bound
        return d


@dataclass(frozen=True, slots=True)
class IdleBreakdown:
    rank: int
    totals: IdleRow
    steps: tuple[IdleRow, ...]  # the device, per step
    streams: tuple[IdleRow, ...]  # per stream over the step range
    stream_steps: tuple[IdleRow, ...]  # per stream and step
    slack_ns: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = self.totals.to_dict()
        d.update(
            dependency_slack_us=self.slack_ns / 1e3,
            steps=[s.to_dict() for s in self.steps],
            streams=[s.to_dict() for s in self.streams],
            notes=list(self.notes),
        )
        return d

    def to_frame(self, by: str = "step") -> pd.DataFrame:
        """``by``: "step" (the device per step), "stream" (per stream) or "stream_step"."""
        rows = {"step": self.steps, "stream": self.streams, "stream_step": self.stream_steps}[by]
        return pd.DataFrame([r.to_dict() for r in rows])


@dataclass(frozen=True, slots=True)
class _Activities:
    start: np.ndarray
    end: np.ndarray
    stream: np.ndarray
    pending: iv.Intervals  # per activity [L, s)
    unknown: iv.Intervals
    held: iv.Intervals


def idle_breakdown(sc: Scope, rank: int, slack_ns: int = 5_000, host_bound_share: float = 0.5) -> IdleBreakdown:
    t = sc.table
    rows = np.flatnonzero(t.mask_kind(*BUSY_KINDS))
    rows = rows[np.argsort(t["ts_ns"][rows], kind="stable")]
    launch = launch_rows(t, rows)
    notes = []
    if len(rows) and (launch < 0).all():
        notes.append(
            "no runtime launch rows correlate with device activity: host and dependency waits are unknown and counted as other"
        )
    streams = np.unique(t["stream"][rows])
    ws, we = sc.win_start, sc.win_end
    device = _split(_activities(t, rows, launch, slice(None), slack_ns), ws, we)
    steps = tuple(_row(int(sc.step_ids[i]), None, device[i], host_bound_share) for i in range(len(ws)))
    per_stream, stream_steps = [], []
    for st in streams.tolist():
        sel = t["stream"][rows] == st
        parts = _split(_activities(t, rows, launch, sel, slack_ns), ws, we)
        srows = [_row(int(sc.step_ids[i]), int(st), parts[i], host_bound_share) for i in range(len(ws))]
        stream_steps.extend(srows)
        per_stream.append(_total(srows, int(st), host_bound_share))
    return IdleBreakdown(
        rank, _total(steps, None, host_bound_share), steps, tuple(per_stream), tuple(stream_steps), slack_ns, tuple(notes)
    )


def _row(step: int, stream: int | None, parts: tuple[int, int, int, int, int], share: float) -> IdleRow:
    wall, idle, host, dep, other = parts
    return IdleRow(step, stream, wall, idle, host, dep, other, share)


def _total(rows, stream: int | None, share: float) -> IdleRow:
    wall, idle, host, dep, other = (sum(getattr(r, f) for r in rows) for f in _FIELDS)
    return IdleRow(None, stream, wall, idle, host, dep, other, share)


def _activities(t: EventTable, rows: np.ndarray, launch: np.ndarray, sel, slack_ns: int) -> _Activities:
    """Pending, unknown and held intervals of the activities ``rows[sel]`` (held judged against all streams)."""
    all_start, all_end, all_stream = t["ts_ns"][rows], t.end_ns[rows], t["stream"][rows]
    start, end, stream, lr = all_start[sel], all_end[sel], all_stream[sel], launch[sel]
    prev_end = _previous_end_on_stream(start, end, stream)
    has = lr >= 0
    lts = np.where(has, t.end_ns[np.clip(lr, 0, None)], start)  # the launch has happened when its call returns
    pending = iv.union(lts[has], start[has])
    unknown = iv.union(prev_end[~has], start[~has])
    gap_from = np.maximum(lts, prev_end)
    other_end = _latest_other_end(start, stream, all_end, all_stream)
    by_stream = (other_end > gap_from) & (start - other_end <= slack_ns)
    by_sync = _sync_in_gap(t, gap_from, start, stream)
    held = has & (gap_from < start) & (by_stream | by_sync)
    return _Activities(start, end, stream, pending, unknown, iv.union(gap_from[held], start[held]))


def _previous_end_on_stream(start, end, stream) -> np.ndarray:
    """The latest end among the earlier activities (by start) on the same stream; the start itself if none."""
    order = np.lexsort((start, stream))
    s, e, st = start[order], end[order], stream[order]
    out = np.empty(len(s), np.int64)
    for lo, hi in _runs(st):
        reach = np.maximum.accumulate(e[lo:hi])
        out[lo] = s[lo]
        out[lo + 1 : hi] = np.minimum(reach[:-1], s[lo + 1 : hi])  # overlapping predecessor: no gap
    res = np.empty(len(s), np.int64)
    res[order] = out
    return res


def _runs(keys: np.ndarray):
    if len(keys) == 0:
        return []
    b = np.flatnonzero(np.diff(keys)) + 1
    return list(zip(np.concatenate([[0], b]).tolist(), np.concatenate([b, [len(keys)]]).tolist()))


def _latest_other_end(start, stream, all_end, all_stream) -> np.ndarray:
    """For each activity, the latest end ≤ its start among the activities of the other streams (-inf if none)."""
    out = np.full(len(start), np.iinfo(np.int64).min, np.int64)
    for st in np.unique(stream).tolist():
        mine = stream == st
        ends = np.sort(all_end[all_stream != st])
        if len(ends) == 0:
            continue
        k = np.searchsorted(ends, start[mine], side="right") - 1
        out[mine] = np.where(k >= 0, ends[np.clip(k, 0, None)], out[mine])
    return out


def _sync_in_gap(t: EventTable, lo, hi, stream) -> np.ndarray:
    """A device sync row (stream wait event) on the activity's stream touching [lo, hi]."""
    sync = np.flatnonzero(t.mask_kind(EventKind.SYNC) & (t["device"] >= 0))
    out = np.zeros(len(lo), bool)
    for st in np.unique(stream).tolist() if len(sync) else []:
        rows = sync[t["stream"][sync] == st]
        mine = np.flatnonzero(stream == st)
        starts, ends = np.sort(t["ts_ns"][rows]), np.sort(t.end_ns[rows])
        # rows starting at or before hi, minus those already over before lo (those start before hi too)
        touching = np.searchsorted(starts, hi[mine], side="right") - np.searchsorted(ends, lo[mine], side="left")
        out[mine] = touching > 0
    return out


def _split(a: _Activities, ws, we) -> list[tuple[int, int, int, int, int]]:
    busy = iv.union(a.start, a.end)
    wall = we - ws
    idle = wall - iv.length_in_windows(busy, ws, we)
    not_host = iv.merge(busy, a.pending, a.unknown)
    host = wall - iv.length_in_windows(not_host, ws, we)
    dep = iv.length_in_windows(iv.subtract(a.held, busy), ws, we)
    other = idle - host - dep
    return [(int(wall[i]), int(idle[i]), int(host[i]), int(dep[i]), int(other[i])) for i in range(len(ws))]
