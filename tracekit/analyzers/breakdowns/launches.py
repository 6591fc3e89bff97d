"""Launch statistics: per device activity, its runtime call (same correlation id), the launch-to-start delay and
the call's duration against the activity's, and whether the activity waited in its stream's queue.

delay = activity start − end of its runtime call (signed: a kernel that starts before its call returns has a
negative delay and is counted in ``negative_delays``; HTA clips those to 0). An activity is **queued** when its
stream was still busy with earlier work (kernels, copies, sets) when its launch call returned: then most of its
delay is the queue (``queue_us`` = time from the launch to the stream's previous work ending), healthy on a
GPU-bound step, and only ``launch_delay_us`` = start − max(launch end, stream free) is the launch's own. An
activity launched onto an idle stream is **idle-launched**: all its delay is launch latency. A kernel shorter
than its launch call is **launch-bound** (kernels and communication kernels; copies and sets are not): the host
cannot launch such kernels as fast as the device runs them. Outliers (HTA's cutoffs): an idle-launched activity
whose delay is above ``delay_cutoff_ns`` (100 µs) -- a queued one is never a delay outlier -- or any runtime call
longer than ``runtime_cutoff_ns`` (50 µs); the ``max_outliers`` longest delays are listed. The **queue depth**
at a launch is the number of the range's activities launched by then and not yet started; per step, its
maximum and mean over the step's launches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...model.events import EventKind, EventTable
from .device_scope import Scope, launch_rows, percentile
from .kernel_classes import ClassRuleSet
from .kernels import label_codes

_LAUNCHED = (int(EventKind.KERNEL), int(EventKind.COMM), int(EventKind.MEMCPY), int(EventKind.MEMSET))
_KERNELS = (int(EventKind.KERNEL), int(EventKind.COMM))  # launch-bound is about kernels, not copies and sets
FRAME_COLUMNS = (
    "name",
    "short_name",
    "class",
    "stream",
    "step",
    "correlation",
    "start_us",
    "kernel_us",
    "runtime_name",
    "runtime_us",
    "delay_us",
    "queued",
    "queue_us",
    "launch_delay_us",
    "launch_bound",
)


@dataclass(frozen=True, slots=True, eq=False)
class LaunchStats:
    """The launched activities of a rank's step range: their rows and their launch rows in the table, from which
    ``columns`` (one row per activity, FRAME_COLUMNS) is derived when asked for. Twelve per-launch arrays kept
    for the analysis's lifetime were 0.2 GB at 1.25 M launches; the two row numbers and two label codes are a
    fifth of that."""

    rank: int
    activities: int  # device activities in the step range
    table: EventTable = field(repr=False)
    rows: np.ndarray = field(repr=False)  # the activities' rows (with a launch row)
    launch: np.ndarray = field(repr=False)  # their launch rows
    labels: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = field(repr=False)  # names, shorts, classes
    label_of: np.ndarray = field(repr=False)  # each row's label (index into the three tuples)
    delay_cutoff_ns: int = 100_000
    runtime_cutoff_ns: int = 50_000
    max_outliers: int = 20
    bound_by_short: tuple[tuple[str, int], ...] = ()  # launch-bound rows per short name, most first (ties by name)
    stream_free_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)  # per row: when
    # its stream's earlier work ended (the max end of the activities before it on its stream; INT64 min if none)

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """One row per activity with a launch row, FRAME_COLUMNS (computed on each access: keep the result)."""
        t, rows, lr = self.table, self.rows, self.launch
        names, shorts, classes = self.labels
        rt_ids, rt_inv = np.unique(t["name_id"][lr], return_inverse=True)  # the runtime calls' few distinct names
        rt_names = np.array([t.strings[i] if i >= 0 else None for i in rt_ids.tolist()], dtype=object)
        kdur, rdur = t["dur_ns"][rows], t["dur_ns"][lr]
        inv = self.label_of
        return {
            "name": np.array(names, dtype=object)[inv],
            "short_name": np.array(shorts, dtype=object)[inv],
            "class": np.array(classes, dtype=object)[inv],
            "stream": t["stream"][rows],
            "step": t["step"][rows].astype(np.int64),
            "correlation": t["correlation"][rows],
            "start_us": t["ts_ns"][rows] / 1e3,
            "kernel_us": kdur / 1e3,
            "runtime_name": rt_names[rt_inv.reshape(-1)],
            "runtime_us": rdur / 1e3,
            "delay_us": (t["ts_ns"][rows] - t.end_ns[lr]) / 1e3,
            **self._queue_columns(),
            "launch_bound": _launch_bound(t, rows, lr),
        }

    def _queue_columns(self) -> dict[str, np.ndarray]:
        t, rows, lr = self.table, self.rows, self.launch
        start, launched, free = t["ts_ns"][rows], t.end_ns[lr], self.stream_free_ns
        queued = free > launched
        return {
            "queued": queued,
            "queue_us": np.where(queued, np.minimum(start, free) - launched, 0) / 1e3,
            "launch_delay_us": (start - np.maximum(launched, free)) / 1e3,
        }

    @property
    def frame(self) -> pd.DataFrame:
        """The columns as a DataFrame (built on request: the summary reads the arrays)."""
        return pd.DataFrame(self.columns, columns=list(FRAME_COLUMNS))

    def _outlier_rows(self, c: Mapping[str, np.ndarray]) -> np.ndarray:
        late = (c["delay_us"] > self.delay_cutoff_ns / 1e3) & ~c["queued"]
        hit = np.flatnonzero(late | (c["runtime_us"] > self.runtime_cutoff_ns / 1e3))
        order = np.lexsort((-c["runtime_us"][hit], -c["delay_us"][hit]))  # both descending, ties in row order
        return hit[order][: self.max_outliers]

    def outliers(self) -> pd.DataFrame:
        c = self.columns
        return pd.DataFrame(c, columns=list(FRAME_COLUMNS)).iloc[self._outlier_rows(c)].reset_index(drop=True)

    def to_dict(self) -> dict:
        c = self.columns
        delay, n = c["delay_us"], len(c["delay_us"])
        bound = int(c["launch_bound"].sum())
        rows = self._outlier_rows(c)
        outliers = [dict(zip(FRAME_COLUMNS, r)) for r in zip(*(c[k][rows].tolist() for k in FRAME_COLUMNS))]
        for r in outliers:  # a nameless runtime call: the DataFrame's missing string, as the records always had
            if r["runtime_name"] is None:
                r["runtime_name"] = float("nan")
        return {
            "activities": self.activities,
            "with_launch": n,
            "median_delay_us": _num(percentile(delay, 50)),
            "p95_delay_us": _num(percentile(delay, 95)),
            "p99_delay_us": _num(percentile(delay, 99)),
            "max_delay_us": _num(delay.max() if n else np.nan),
            "negative_delays": int((delay < 0).sum()),
            "median_runtime_us": _num(percentile(c["runtime_us"], 50)),
            "p95_runtime_us": _num(percentile(c["runtime_us"], 95)),
            "median_kernel_us": _num(percentile(c["kernel_us"], 50)),
            "launch_bound_kernels": {
                "count": bound,
                "share": bound / n if n else 0.0,
                "by_short_name": [{"short_name": k, "count": v} for k, v in self.bound_by_short],
            },
            **self._queue_dict(c),
            "delay_cutoff_us": self.delay_cutoff_ns / 1e3,
            "runtime_cutoff_us": self.runtime_cutoff_ns / 1e3,
            "delay_outliers": int(((delay > self.delay_cutoff_ns / 1e3) & ~c["queued"]).sum()),
            "runtime_outliers": int((c["runtime_us"] > self.runtime_cutoff_ns / 1e3).sum()),
            "outliers": outliers,
        }

    def to_frame(self) -> pd.DataFrame:
        return self.frame

    def _queue_dict(self, c: Mapping[str, np.ndarray]) -> dict:
        queued, n = c["queued"], len(c["queued"])
        idle = c["delay_us"][~queued]
        return {
            "queued": int(queued.sum()),
            "queued_share": float(queued.sum()) / n if n else 0.0,
            "median_queue_us": _num(percentile(c["queue_us"][queued], 50)),
            "idle_launched": int(n - queued.sum()),
            "median_idle_delay_us": _num(percentile(idle, 50)),
            "p95_idle_delay_us": _num(percentile(idle, 95)),
            "queue_depth": queue_depth(self.table, self.rows, self.launch),
        }


def queue_depth(t: EventTable, rows: np.ndarray, lr: np.ndarray) -> list[dict]:
    """Per step (the activity's), the queue depth at each of its launches -- the range's activities launched by
    then (launch call ended) and not yet started -- as its maximum and mean; steps in number order."""
    if len(rows) == 0:
        return []
    launched, start = t.end_ns[lr], t["ts_ns"][rows]
    at = launched
    depth = np.searchsorted(np.sort(launched), at, side="right") - np.searchsorted(np.sort(start), at, side="right")
    depth = np.maximum(depth, 0)
    step = t["step"][rows].astype(np.int64)
    out = []
    for s in np.unique(step).tolist():
        d = depth[step == s]
        out.append({"step": int(s), "max": int(d.max()), "mean": float(d.mean())})
    return out


def stream_free(t: EventTable, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, when the earlier work on its stream ended: the maximum end of every busy activity
    (kernels, communication, copies, sets) of the table that starts before it on the same (device, stream);
    INT64 min where none does."""
    none = np.iinfo(np.int64).min
    busy = np.flatnonzero(np.isin(t["kind"], _LAUNCHED))
    out = np.full(len(rows), none, np.int64)
    if not len(busy) or not len(rows):
        return out
    key = t["device"][busy].astype(np.int64) * (1 << 40) + t["stream"][busy].astype(np.int64)
    order = np.lexsort((busy, t["ts_ns"][busy], key))  # by stream, then start, then row
    b, k = busy[order], key[order]
    ends = t.end_ns[b].astype(np.int64)
    bounds = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    before = np.full(len(b), none, np.int64)
    for lo, hi in zip(bounds.tolist(), [*bounds[1:].tolist(), len(b)]):  # one pass per stream
        before[lo + 1 : hi] = np.maximum.accumulate(ends[lo : hi - 1])
    pos = np.full(len(t), -1, np.int64)
    pos[b] = np.arange(len(b))
    at = pos[rows]
    out[at >= 0] = before[at[at >= 0]]
    return out


def _launch_bound(t: EventTable, rows: np.ndarray, lr: np.ndarray) -> np.ndarray:
    return (t["dur_ns"][rows] < t["dur_ns"][lr]) & np.isin(t["kind"][rows], _KERNELS)


def _num(x) -> float | None:
    x = float(x)
    return None if x != x else x


def launch_stats(
    sc: Scope,
    rank: int,
    rules: ClassRuleSet,
    delay_cutoff_ns: int = 100_000,
    runtime_cutoff_ns: int = 50_000,
    max_outliers: int = 20,
) -> LaunchStats | None:
    """None when no activity of the range has a runtime launch row."""
    t = sc.table
    launched = np.isin(t["kind"][sc.rows], _LAUNCHED)
    rows = sc.rows[launched]
    lr = launch_rows(t, rows)
    has = lr >= 0
    if not has.any():
        return None
    rows, lr = rows[has], lr[has]
    names, _, classes, inv = label_codes(t, rows, rules)
    scope_names, scope_shorts, _, _ = label_codes(t, sc.rows, rules)  # the labels the kernel breakdown shows
    label = dict(zip(scope_names, scope_shorts))
    shorts = [label[n] for n in names]
    bound = _launch_bound(t, rows, lr)
    return LaunchStats(
        rank,
        int(launched.sum()),
        t,
        rows,
        lr,
        (tuple(names), tuple(shorts), tuple(classes)),
        np.asarray(inv, np.int32 if len(names) < 2**31 else np.int64),
        delay_cutoff_ns,
        runtime_cutoff_ns,
        max_outliers,
        _by_short(shorts, inv[bound]),
        stream_free(t, rows),
    )


def _by_short(shorts: list[str], pairs: np.ndarray, top: int = 10) -> tuple[tuple[str, int], ...]:
    """The ``top`` short names with the most rows (``pairs``: each row's (name, kind) pair), ties by name: what
    ``groupby(short_name).size()`` sorted by count (stable) gave."""
    counts: dict[str, int] = {}
    for i, c in enumerate(np.bincount(pairs, minlength=len(shorts)).tolist()):
        if c:
            counts[shorts[i]] = counts.get(shorts[i], 0) + c
    by_name = sorted(counts.items())
    return tuple(sorted(by_name, key=lambda kv: -kv[1])[:top])
