"""The memory timeline of torch.profiler's raw export (``loader.memory_export``): bytes live over time, in total and
by torch's categories (parameter, activation, gradient, ...), its peak and what the peak is made of.

The state at a timestamp is the state after every entry of that timestamp (torch's own plot,
``MemoryProfileTimeline._coalesce_timeline``, does the same per µs); the tensors that existed before profiling
(timestamp -1) are placed at the first timestamp of the file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...loader.memory_export import CATEGORIES, MemoryExport, read_memory_export
from .timeline import downsample


@dataclass(frozen=True, slots=True, eq=False)
class ExportTimeline:
    source: str
    events: int
    t_ns: np.ndarray  # one point per distinct timestamp (int64: epoch ns do not fit a float64)
    allocated_bytes: np.ndarray
    by_category: np.ndarray  # (points, len(CATEGORIES))
    preexisting_bytes: int
    max_points: int

    @property
    def t_us(self) -> np.ndarray:
        return self.t_ns / 1e3

    @property
    def peak(self) -> int:
        return int(np.argmax(self.allocated_bytes))

    @property
    def peak_bytes(self) -> int:
        return int(self.allocated_bytes[self.peak])

    def category_bytes_at_peak(self) -> dict[str, int]:
        return {c: int(b) for c, b in zip(CATEGORIES, self.by_category[self.peak].tolist())}

    def to_dict(self) -> dict:
        keep = downsample(self.allocated_bytes, self.max_points)
        notes = (
            []
            if len(keep) == len(self.t_us)
            else [
                f"points downsampled: {len(keep)} of {len(self.t_us)} kept (the maximum and the last of each bucket); "
                "`--points N` sets the number"
            ]
        )
        return {
            "source": self.source,
            "events": self.events,
            "peak_allocated_bytes": self.peak_bytes,
            "peak_us": float(self.t_us[self.peak]),
            "preexisting_bytes": self.preexisting_bytes,
            "end_allocated_bytes": int(self.allocated_bytes[-1]),
            "categories_at_peak": self.category_bytes_at_peak(),
            "points": {"t_us": self.t_us[keep].tolist(), "allocated_bytes": self.allocated_bytes[keep].tolist()},
            "points_total": len(self.t_us),
            "notes": notes,
        }


def export_timeline(exp: MemoryExport, max_points: int = 1000) -> ExportTimeline:
    ts = exp.ts_ns.copy()
    real = ts[ts >= 0]
    ts[ts < 0] = real.min() if len(real) else 0
    order = np.argsort(ts, kind="stable")
    ts, nbytes, cat = ts[order], exp.nbytes[order], exp.category[order].astype(np.int64)
    per_cat = np.zeros((len(ts), len(CATEGORIES)), dtype=np.int64)
    per_cat[np.arange(len(ts)), cat] = nbytes
    per_cat = np.cumsum(per_cat, axis=0)
    last = np.r_[ts[1:] != ts[:-1], True]  # the state after the last entry of each timestamp
    per_cat = per_cat[last]
    return ExportTimeline(
        exp.source, len(exp), ts[last], per_cat.sum(axis=1), per_cat, int(exp.nbytes[exp.ts_ns < 0].sum()), max_points
    )


def read_export_timeline(path, max_points: int = 1000) -> ExportTimeline:
    """``tracekit memory timeline FILE``: the raw export at ``path`` read and measured."""
    return export_timeline(read_memory_export(path), max_points)
