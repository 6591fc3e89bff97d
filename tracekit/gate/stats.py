"""Medians and spreads over steps: the robust statistics the gate compares, so noise is not a regression."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


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


def _quartiles(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """``statistics.quantiles(values, n=4, method="inclusive")``'s first and third, of sorted ``values``: its own
    arithmetic on the two neighbours, so a numpy array of 10**6 steps gives the same floats as the list did."""
    if len(values) < 2:
        return float(values[0]), float(values[0])
    m = len(values) - 1
    out = []
    for i in (1, 3):
        j, delta = divmod(i * m, 4)
        out.append((float(values[j]) * (4 - delta) + float(values[j + 1]) * delta) / 4)
    return out[0], out[1]


def _median(ordered: Sequence[float] | np.ndarray) -> float:
    """``statistics.median`` of sorted values (the same arithmetic)."""
    n = len(ordered)
    if n % 2:
        return float(ordered[n // 2])
    return (float(ordered[n // 2 - 1]) + float(ordered[n // 2])) / 2


def stat_over_ranks(per_rank: Mapping[Any, Iterable[float | None]]) -> Stat | None:
    """Median over each rank's step values, then median of those medians; None values are skipped.

    Returns None when no rank has a value (the metric is not available in this run). Sorted with numpy: a baseline of
    10**6 steps is a few sorts of a float array per metric, not of Python lists.
    """
    rank_medians: list[float] = []
    parts: list[np.ndarray] = []
    for values in per_rank.values():
        vals = np.sort(np.fromiter((v for v in values if v is not None), dtype=np.float64))
        if len(vals):
            rank_medians.append(_median(vals))
            parts.append(vals)
    if not rank_medians:
        return None
    everything = np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0]
    q1, q3 = _quartiles(everything)
    return Stat(statistics.median(rank_medians), float(everything[0]), float(everything[-1]), q1, q3, len(everything))
