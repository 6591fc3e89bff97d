"""Every table of ``tracekit.analyze``'s result as a pandas DataFrame (HTA's habit, for notebooks): one accessor per
table, the column names of the JSON summary (docs/summary-schema.md), per-rank tables with a ``rank`` column first.

The frames are built from the same dicts the summary is (``to_dict`` of each result), so a column never means
something else than the JSON key of its name. A rank whose breakdown has no meaning (a CPU-only run, a trace without
[memory] events) has no rows; ``frame.attrs["unavailable"]`` maps it to the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import pandas as pd

from ..formats import summary as doc

_COMM_ROWS = {
    "collectives": doc.CollectiveRow,
    "by_dimension": doc.DimensionRow,
    "by_process_group": doc.GroupRow,
    "stragglers": doc.Straggler,
    "clock_offsets": doc.ClockOffset,
}


def _frame(rows: Iterable[dict], columns: list[str] | None = None) -> pd.DataFrame:
    rows = list(rows)
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns or [])


def _per_rank(sections: dict[int, Any], pick: Callable[[Any], Any], columns: list[str]) -> pd.DataFrame:
    rows: list[dict] = []
    unavailable: dict[int, str] = {}
    for rank, section in sorted(sections.items()):
        if isinstance(section, dict) and section.get("available") is False:
            unavailable[rank] = section.get("reason", "")
            continue
        rows.extend({"rank": rank, **row} for row in (pick(section) or []))
    df = _frame(rows, ["rank", *columns])
    df.attrs["unavailable"] = unavailable
    return df


class AnalysisFrames:
    """Mixed into ``Analysis``: ``analysis.steps_frame()``, ``analysis.kernel_frame()``, ..."""

    __slots__ = ()

    # -- communication ----------------------------------------------------------------------------------------
    def steps_frame(self) -> pd.DataFrame:
        """``ranks[].steps[]``: one row per rank and step."""
        return _frame({"rank": r.rank, **s} for r in self.comm.ranks for s in r.to_dict()["steps"])  # type: ignore[attr-defined]

    def _comm(self, key: str) -> pd.DataFrame:
        columns = [f.encode_name for f in msgspec.structs.fields(_COMM_ROWS[key])]  # type: ignore[arg-type]  # the JSON's, also when empty
        return _frame(self.comm.to_dict()[key], columns)  # type: ignore[attr-defined]

    def collectives_frame(self) -> pd.DataFrame:
        """``collectives``: one row per collective instance."""
        return self._comm("collectives")

    def dimensions_frame(self) -> pd.DataFrame:
        """``by_dimension``: per parallel dimension and op."""
        return self._comm("by_dimension")

    def process_groups_frame(self) -> pd.DataFrame:
        """``by_process_group``."""
        return self._comm("by_process_group")

    def stragglers_frame(self) -> pd.DataFrame:
        """``stragglers``."""
        return self._comm("stragglers")

    def clock_offsets_frame(self) -> pd.DataFrame:
        """``clock_offsets``."""
        return self._comm("clock_offsets")

    # -- single-rank breakdowns (docs/breakdowns.md) --------------------------------------------------------------
    def _breakdown(self, key: str) -> dict[int, dict]:
        return {r: b.to_dict()[key] for r, b in (self.breakdowns or {}).items()}  # type: ignore[attr-defined]

    def kernel_frame(self, by: str = "name") -> pd.DataFrame:
        """``ranks[].kernel_breakdown`` (by="name") or ``ranks[].kernel_classes`` (by="class")."""
        key = {"name": "kernel_breakdown", "class": "kernel_classes"}[by]
        return _per_rank(self._breakdown(key), lambda s: s, ["name"] if by == "name" else ["class"])

    def busy_partition_frame(self) -> pd.DataFrame:
        """``ranks[].busy_partition.parts`` with the rank's ``busy_us``."""
        return _per_rank(
            self._breakdown("busy_partition"),
            lambda s: [{**p, "busy_us": s["busy_us"]} for p in s["parts"]],
            ["part", "us", "share"],
        )

    def idle_frame(self, by: str = "step") -> pd.DataFrame:
        """``ranks[].idle_breakdown.steps`` (by="step") or ``.streams`` (by="stream")."""
        key = {"step": "steps", "stream": "streams"}[by]
        return _per_rank(self._breakdown("idle_breakdown"), lambda s: s[key], [by])

    def launch_stats_frame(self) -> pd.DataFrame:
        """``ranks[].launch_stats``: one row per rank of its scalar figures (the lists left out)."""
        return _per_rank(
            self._breakdown("launch_stats"), lambda s: [{k: v for k, v in s.items() if not isinstance(v, (list, dict))}], []
        )

    def launch_outliers_frame(self) -> pd.DataFrame:
        """``ranks[].launch_stats.outliers``."""
        return _per_rank(self._breakdown("launch_stats"), lambda s: s["outliers"], [])

    # -- memory timeline ------------------------------------------------------------------------------------------
    def _memory(self) -> dict[int, dict]:
        return {r: m.to_dict() for r, m in (self.memory or {}).items()}  # type: ignore[attr-defined]

    def memory_devices_frame(self) -> pd.DataFrame:
        """``ranks[].memory_timeline.devices``."""
        return _per_rank(self._memory(), lambda s: s["devices"], ["device"])

    def memory_peaks_frame(self) -> pd.DataFrame:
        """``ranks[].memory_timeline.steps``: the peak per step and device."""
        return _per_rank(self._memory(), lambda s: s["steps"], ["step", "device", "peak_allocated_bytes"])

    def memory_points_frame(self) -> pd.DataFrame:
        """``ranks[].memory_timeline.points``, one row per point (the JSON holds them as columns per device)."""
        return _per_rank(
            self._memory(),
            lambda s: [
                {"device": p["device"], "t_us": t, "allocated_bytes": a, "reserved_bytes": b}
                for p in s["points"]
                for t, a, b in zip(p["t_us"], p["allocated_bytes"], p["reserved_bytes"])
            ],
            ["device", "t_us", "allocated_bytes", "reserved_bytes"],
        )

    def memory_allocators_frame(self) -> pd.DataFrame:
        """``ranks[].memory_timeline.top_allocators``."""
        return _per_rank(self._memory(), lambda s: s["top_allocators"], ["device", "op", "live_bytes"])
