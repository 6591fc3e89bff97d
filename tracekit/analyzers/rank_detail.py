"""How much of each rank's own detail a summary keeps, so that it stays under a stated size per rank at any number
of ranks (docs/summary-schema.md, ``rank_detail``).

Up to ``full_detail_ranks()`` ranks (64, or ``TRACEKIT_FULL_DETAIL_RANKS``) every rank's single-rank sections are
whole. Beyond, each rank keeps the ``KERNELS_PER_RANK`` kernels of ``kernel_breakdown`` with the most device time,
the ``OUTLIERS_PER_RANK`` longest launch delays of ``launch_stats.outliers`` and at most ``MEMORY_POINTS_PER_RANK``
points of each device's memory timeline; the counts of rows left out are the summary's ``rank_detail``. Figures
over a whole rank or the whole run (totals, kernel classes, launch percentiles, the busy partition, idle causes,
by_dimension, stragglers, clock offsets) are never cut: they are computed before the rows are dropped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_FULL_DETAIL_RANKS = 64
KERNELS_PER_RANK = 10
OUTLIERS_PER_RANK = 5
MEMORY_POINTS_PER_RANK = 50
# the stated size of a rank in a cut summary as `analyze --format json` writes it, without `collectives` (at most
# 20,000 rows over the run): 18.8, 20.3 and 21.1 KB measured with one, two and three profiled steps of a generated
# run (tests/unit/analyzers/test_rank_detail.py holds it to this)
BYTES_PER_RANK = 20_000
BYTES_PER_STEP = 1_500  # each profiled step adds its row in `steps` and in the idle breakdown


def bytes_per_rank(steps: int) -> int:
    """What one rank may take in a summary cut by ``detail_limit`` with ``steps`` profiled steps."""
    return BYTES_PER_RANK + BYTES_PER_STEP * steps


def full_detail_ranks() -> int:
    """The limit: TRACEKIT_FULL_DETAIL_RANKS when it is a positive integer, else the default."""
    text = os.environ.get("TRACEKIT_FULL_DETAIL_RANKS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_FULL_DETAIL_RANKS


@dataclass(frozen=True, slots=True)
class DetailLimit:
    """Rows kept per rank (None: all of them)."""

    ranks: int
    kernels: int | None = None
    outliers: int | None = None
    memory_points: int | None = None

    @property
    def whole(self) -> bool:
        return self.kernels is None

    def memory(self, points: int) -> int:
        return points if self.memory_points is None else min(points, self.memory_points)


def detail_limit(ranks: int) -> DetailLimit:
    if ranks <= full_detail_ranks():
        return DetailLimit(ranks)
    return DetailLimit(ranks, KERNELS_PER_RANK, OUTLIERS_PER_RANK, MEMORY_POINTS_PER_RANK)


@dataclass(frozen=True, slots=True)
class Sections:
    """A rank's breakdowns as their summary sections (``to_dict()``), already cut to a DetailLimit, with the rows
    left out: what crosses the process boundary from a worker (launch statistics otherwise hold the whole table)."""

    sections: Mapping[str, Any]
    omitted: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.sections)


def cut(breakdowns: Any, limit: DetailLimit) -> Sections:
    """``breakdowns`` (a RankBreakdowns, or Sections already cut to ``limit``) as Sections cut to ``limit``."""
    if isinstance(breakdowns, Sections):
        return breakdowns
    d = breakdowns.to_dict()
    if limit.whole:
        return Sections(d)
    omitted = {"kernel_rows": 0, "outlier_rows": 0}
    kernels = d.get("kernel_breakdown")
    if isinstance(kernels, list) and limit.kernels is not None and len(kernels) > limit.kernels:
        keep = sorted(range(len(kernels)), key=lambda i: (-float(kernels[i].get("total_us") or 0.0), i))[: limit.kernels]
        d["kernel_breakdown"] = [kernels[i] for i in sorted(keep)]
        omitted["kernel_rows"] = len(kernels) - limit.kernels
    launches = d.get("launch_stats")
    outliers = launches.get("outliers") if isinstance(launches, Mapping) else None
    if isinstance(outliers, list) and limit.outliers is not None and len(outliers) > limit.outliers:
        d["launch_stats"] = {**launches, "outliers": outliers[: limit.outliers]}  # listed longest delay first
        omitted["outlier_rows"] = len(outliers) - limit.outliers
    return Sections(d, omitted)


def summary_section(limit: DetailLimit, parts: Mapping[int, Sections]) -> dict:
    """The summary's ``rank_detail``: the limits and the rows they left out over every rank."""
    return {
        "ranks": limit.ranks,
        "full_detail_ranks": full_detail_ranks(),
        "kernels_per_rank": limit.kernels,
        "outliers_per_rank": limit.outliers,
        "memory_points_per_device": limit.memory_points,
        "kernel_rows_omitted": sum(p.omitted.get("kernel_rows", 0) for p in parts.values()),
        "outlier_rows_omitted": sum(p.omitted.get("outlier_rows", 0) for p in parts.values()),
    }


def warning(section: Mapping) -> str:
    return (
        f"with {section['ranks']} ranks (more than {section['full_detail_ranks']}) the summary keeps each rank's "
        f"{section['kernels_per_rank']} kernels with the most device time, {section['outliers_per_rank']} longest launch "
        f"delays and {section['memory_points_per_device']} memory points per device (`rank_detail`: "
        f"{section['kernel_rows_omitted']} kernel rows and {section['outlier_rows_omitted']} outlier rows left out); "
        "TRACEKIT_FULL_DETAIL_RANKS raises the limit"
    )
