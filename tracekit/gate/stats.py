"""Medians and spreads over steps: the robust statistics the gate compares, so noise is not a regression."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Stat:
    """One metric of one run: median over steps per rank, then median across ranks, with the spread.

    ``lo``/``hi`` are the smallest and largest per-step value over all ranks; ``q1``/``q3`` the quartiles of
    the same values; ``samples`` how many (rank, step) values there were. ``basis`` says what a sample is:
    "per step" normally, "run total" where the summary had no per-step figures for this metric.
    """

    median: float
    lo: float
    hi: float
    q1: float
    q3: float
    samples: int
    basis: str = "per step"

    @classmethod
    def single(cls, value: float, basis: str = "run total") -> Stat:
        v = float(value)
        return cls(v, v, v, v, v, 1, basis)

    def spread_text(self, fmt) -> str:
        if self.samples <= 1:
            return self.basis
        return f"steps {fmt(self.lo)}..{fmt(self.hi)}"

    def to_dict(self) -> dict:
        return {
            "median": self.median,
            "min": self.lo,
            "max": self.hi,
            "q1": self.q1,
            "q3": self.q3,
            "samples": self.samples,
            "basis": self.basis,
        }


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def stat_over_ranks(per_rank: Mapping[Any, Iterable[float | None]]) -> Stat | None:
    """Median over each rank's step values, then median of those medians; None values are skipped.

    Returns None when no rank has a value (the metric is not available in this run).
    """
    rank_medians: list[float] = []
    everything: list[float] = []
    for values in per_rank.values():
        vals = [float(v) for v in values if v is not None]
        if vals:
            rank_medians.append(statistics.median(vals))
            everything.extend(vals)
    if not rank_medians:
        return None
    q1, q3 = _quartiles(sorted(everything))
    return Stat(statistics.median(rank_medians), min(everything), max(everything), q1, q3, len(everything))
