"""Launch statistics: per device activity, its runtime call (same correlation id), the launch-to-start delay and
the call's duration against the activity's.

delay = activity start − end of its runtime call (signed: a kernel that starts before its call returns has a
negative delay and is counted in ``negative_delays``; HTA clips those to 0). A kernel shorter than its launch
call is **launch-bound** (kernels and communication kernels; copies and sets are not): the host cannot launch
such kernels as fast as the device runs them. Outliers (HTA's cutoffs): a delay above ``delay_cutoff_ns``
(100 µs) or a runtime call longer than ``runtime_cutoff_ns`` (50 µs); the ``max_outliers`` longest delays are
listed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..model.events import EventKind
from .device_scope import Scope, launch_rows, percentile
from .kernel_classes import ClassRuleSet
from .kernels import name_labels

_LAUNCHED = (int(EventKind.KERNEL), int(EventKind.COMM), int(EventKind.MEMCPY), int(EventKind.MEMSET))
_KERNELS = (int(EventKind.KERNEL), int(EventKind.COMM))  # launch-bound is about kernels, not copies and sets
FRAME_COLUMNS = ("name", "short_name", "class", "stream", "step", "correlation", "start_us", "kernel_us",
                 "runtime_name", "runtime_us", "delay_us", "launch_bound")


@dataclass(frozen=True, slots=True, eq=False)
class LaunchStats:
    rank: int
    activities: int  # device activities in the step range
    frame: pd.DataFrame  # one row per activity with a launch row, FRAME_COLUMNS
    delay_cutoff_ns: int
    runtime_cutoff_ns: int
    max_outliers: int

    def _delay(self) -> np.ndarray:
        return self.frame["delay_us"].to_numpy(float)

    def outliers(self) -> pd.DataFrame:
        f = self.frame
        hit = (f["delay_us"] > self.delay_cutoff_ns / 1e3) | (f["runtime_us"] > self.runtime_cutoff_ns / 1e3)
        out = f[hit].sort_values(["delay_us", "runtime_us"], ascending=False, kind="stable").head(self.max_outliers)
        return _as_text(out.reset_index(drop=True))

    def to_dict(self) -> dict:
        f, delay = self.frame, self._delay()
        bound = f[f["launch_bound"]]
        by_short = bound.groupby("short_name").size().sort_values(ascending=False, kind="stable").head(10)
        return {
            "activities": self.activities, "with_launch": len(f),
            "median_delay_us": _num(percentile(delay, 50)), "p95_delay_us": _num(percentile(delay, 95)),
            "p99_delay_us": _num(percentile(delay, 99)), "max_delay_us": _num(delay.max() if len(delay) else np.nan),
            "negative_delays": int((delay < 0).sum()),
            "median_runtime_us": _num(percentile(f["runtime_us"].to_numpy(float), 50)),
            "p95_runtime_us": _num(percentile(f["runtime_us"].to_numpy(float), 95)),
            "median_kernel_us": _num(percentile(f["kernel_us"].to_numpy(float), 50)),
            "launch_bound_kernels": {"count": len(bound), "share": len(bound) / len(f) if len(f) else 0.0,
                                     "by_short_name": [{"short_name": k, "count": int(v)} for k, v in by_short.items()]},
            "delay_cutoff_us": self.delay_cutoff_ns / 1e3, "runtime_cutoff_us": self.runtime_cutoff_ns / 1e3,
            "delay_outliers": int((f["delay_us"] > self.delay_cutoff_ns / 1e3).sum()),
            "runtime_outliers": int((f["runtime_us"] > self.runtime_cutoff_ns / 1e3).sum()),
            "outliers": [_row(r) for r in self.outliers().to_dict("records")],
        }

    def to_frame(self) -> pd.DataFrame:
        return _as_text(self.frame)


_LABELS = ("name", "short_name", "class", "runtime_name")


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """The label columns as strings again (a copy): what users get from the frames."""
    return frame.astype({c: "str" for c in _LABELS})


def _num(x) -> float | None:
    x = float(x)
    return None if x != x else x


def _row(r: dict) -> dict:
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}


def launch_stats(sc: Scope, rank: int, rules: ClassRuleSet, delay_cutoff_ns: int = 100_000,
                 runtime_cutoff_ns: int = 50_000, max_outliers: int = 20) -> LaunchStats | None:
    """None when no activity of the range has a runtime launch row."""
    t = sc.table
    rows = sc.rows[np.isin(t["kind"][sc.rows], _LAUNCHED)]
    lr = launch_rows(t, rows)
    has = lr >= 0
    if not has.any():
        return None
    rows, lr = rows[has], lr[has]
    kname, shorts, classes = name_labels(t, rows, rules)
    names = t.decode("name_id")
    kdur, rdur = t["dur_ns"][rows], t["dur_ns"][lr]
    # labels as Categoricals: one copy of each distinct name, not one per row (kernel signatures run to hundreds of
    # bytes: as str columns the frame took ~370 B a row, most of the analysis' memory at millions of kernels)
    frame = pd.DataFrame({
        "name": pd.Categorical(kname), "short_name": pd.Categorical(shorts), "class": pd.Categorical(classes),
        "stream": t["stream"][rows],
        "step": t["step"][rows].astype(np.int64), "correlation": t["correlation"][rows],
        "start_us": t["ts_ns"][rows] / 1e3, "kernel_us": kdur / 1e3, "runtime_name": pd.Categorical(names[lr]),
        "runtime_us": rdur / 1e3, "delay_us": (t["ts_ns"][rows] - t.end_ns[lr]) / 1e3,
        "launch_bound": (kdur < rdur) & np.isin(t["kind"][rows], _KERNELS),
    }, columns=list(FRAME_COLUMNS))
    return LaunchStats(rank, len(sc.rows[np.isin(t["kind"][sc.rows], _LAUNCHED)]), frame, delay_cutoff_ns,
                       runtime_cutoff_ns, max_outliers)
