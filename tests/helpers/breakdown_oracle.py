"""The oracle for the single-rank breakdowns: verbatim copies of their previous implementations (kernel groups by a
pandas MultiIndex and one ``np.percentile`` per group, launch statistics by a pandas DataFrame and ``groupby``,
launched rows by ``np.unique``), kept so that tests/unit/analyzers/test_breakdowns_fast.py can check the numpy
versions against them on every trace in tests/data. Do not optimise this file: its slowness is the point.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analyzers.breakdowns.device_scope import Scope, launch_rows, percentile
from tracekit.analyzers.breakdowns.kernel_classes import ClassRuleSet
from tracekit.analyzers.breakdowns.kernels import KernelStats, busy_partition
from tracekit.analyzers.names import short_name
from tracekit.model.events import EventKind, EventTable


def name_labels(t: EventTable, rows: np.ndarray, rules: ClassRuleSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if len(rows) == 0:
        return np.empty(0, object), np.empty(0, object), np.empty(0, object)
    pair = t["name_id"][rows].astype(np.int64) * 256 + t["kind"][rows].astype(np.int64)
    uniq, inv = np.unique(pair, return_inverse=True)
    names = [t.strings[int(p) // 256] if int(p) // 256 >= 0 else "" for p in uniq]
    classes = rules.classify(names, [int(p) % 256 for p in uniq])
    shorts = [short_name(n) for n in names]
    return (np.array(names, dtype=object)[inv], np.array(shorts, dtype=object)[inv], np.array(classes, dtype=object)[inv])


def _aggregate(keys: dict[str, np.ndarray], dur: np.ndarray, busy_ns: int) -> tuple[KernelStats, ...]:
    if len(dur) == 0:
        return ()
    frame = pd.DataFrame({k: v for k, v in keys.items()})
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(frame) if len(keys) > 1 else frame.iloc[:, 0])
    order = np.lexsort((dur, codes))
    c, d = codes[order], dur[order]
    bounds = np.flatnonzero(np.diff(c)) + 1
    out = []
    for group in np.split(np.arange(len(d)), bounds):
        g = d[group]
        label = uniques[c[group[0]]]
        values = label if isinstance(label, tuple) else (label,)
        total = int(g.sum())
        out.append(
            KernelStats(
                tuple(zip(keys, (str(v) for v in values))),
                len(g),
                total,
                total / len(g),
                percentile(g, 50),
                percentile(g, 95),
                int(g[-1]),
                total / busy_ns if busy_ns else 0.0,
            )
        )
    out.sort(key=lambda s: (-s.total_ns, s.key))
    return tuple(out)


def kernel_groups(sc: Scope, rules: ClassRuleSet):
    """(by name, by class, by short name) as kernels.kernel_breakdown made them."""
    rows = sc.rows
    dur = sc.table["dur_ns"][rows]
    busy = busy_partition(sc, 0).busy_ns
    full, short, cls = name_labels(sc.table, rows, rules)
    return (
        _aggregate({"name": full, "short_name": short, "class": cls}, dur, busy),
        _aggregate({"class": cls}, dur, busy),
        _aggregate({"short_name": short, "class": cls}, dur, busy),
    )


_LAUNCHED = (int(EventKind.KERNEL), int(EventKind.COMM), int(EventKind.MEMCPY), int(EventKind.MEMSET))
_KERNELS = (int(EventKind.KERNEL), int(EventKind.COMM))
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
    "launch_bound",
)


def launch_frame(sc: Scope, rules: ClassRuleSet) -> tuple[int, pd.DataFrame] | None:
    """(activities, frame) as launches.launch_stats built them."""
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
    frame = pd.DataFrame(
        {
            "name": kname,
            "short_name": shorts,
            "class": classes,
            "stream": t["stream"][rows],
            "step": t["step"][rows].astype(np.int64),
            "correlation": t["correlation"][rows],
            "start_us": t["ts_ns"][rows] / 1e3,
            "kernel_us": kdur / 1e3,
            "runtime_name": names[lr],
            "runtime_us": rdur / 1e3,
            "delay_us": (t["ts_ns"][rows] - t.end_ns[lr]) / 1e3,
            "launch_bound": (kdur < rdur) & np.isin(t["kind"][rows], _KERNELS),
        },
        columns=list(FRAME_COLUMNS),
    )
    return len(sc.rows[np.isin(t["kind"][sc.rows], _LAUNCHED)]), frame


def _num(x) -> float | None:
    x = float(x)
    return None if x != x else x


def _row(r: dict) -> dict:
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}


def _outliers(f: pd.DataFrame, delay_cutoff_ns: int, runtime_cutoff_ns: int, max_outliers: int) -> pd.DataFrame:
    hit = (f["delay_us"] > delay_cutoff_ns / 1e3) | (f["runtime_us"] > runtime_cutoff_ns / 1e3)
    out = f[hit].sort_values(["delay_us", "runtime_us"], ascending=False, kind="stable").head(max_outliers)
    return out.reset_index(drop=True)


def launch_dict(
    activities: int, f: pd.DataFrame, delay_cutoff_ns: int = 100_000, runtime_cutoff_ns: int = 50_000, max_outliers: int = 20
) -> dict:
    """LaunchStats.to_dict() as it was."""
    delay = f["delay_us"].to_numpy(float)
    bound = f[f["launch_bound"]]
    by_short = bound.groupby("short_name").size().sort_values(ascending=False, kind="stable").head(10)
    return {
        "activities": activities,
        "with_launch": len(f),
        "median_delay_us": _num(percentile(delay, 50)),
        "p95_delay_us": _num(percentile(delay, 95)),
        "p99_delay_us": _num(percentile(delay, 99)),
        "max_delay_us": _num(delay.max() if len(delay) else np.nan),
        "negative_delays": int((delay < 0).sum()),
        "median_runtime_us": _num(percentile(f["runtime_us"].to_numpy(float), 50)),
        "p95_runtime_us": _num(percentile(f["runtime_us"].to_numpy(float), 95)),
        "median_kernel_us": _num(percentile(f["kernel_us"].to_numpy(float), 50)),
        "launch_bound_kernels": {
            "count": len(bound),
            "share": len(bound) / len(f) if len(f) else 0.0,
            "by_short_name": [{"short_name": k, "count": int(v)} for k, v in by_short.items()],
        },
        "delay_cutoff_us": delay_cutoff_ns / 1e3,
        "runtime_cutoff_us": runtime_cutoff_ns / 1e3,
        "delay_outliers": int((f["delay_us"] > delay_cutoff_ns / 1e3).sum()),
        "runtime_outliers": int((f["runtime_us"] > runtime_cutoff_ns / 1e3).sum()),
        "outliers": [_row(r) for r in _outliers(f, delay_cutoff_ns, runtime_cutoff_ns, max_outliers).to_dict("records")],
    }


def launched(table: EventTable, device: np.ndarray) -> np.ndarray:
    """steps._launched as it was."""
    corr = table["correlation"]
    rc = np.unique(corr[table.mask_kind(EventKind.RUNTIME) & (corr >= 0)])
    return device & np.isin(corr, rc) & (corr >= 0)
