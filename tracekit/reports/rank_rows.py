"""Tables with one row per rank, kept readable at a thousand ranks: up to ``MAX_RANK_ROWS`` ranks every rank has its
row; beyond, the table says which ranks it covers (``0–1023 (1024)``), shows the distribution over ranks (min,
median, p90, max of each column, order statistics of the summary's own per-rank figures) and then the ``top``
ranks that are worst by the table's key figure (most exposed communication, most caused wait, largest clock
correction). Nothing is computed that the summary does not hold: rows are picked, and values ranked."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from . import view

MAX_RANK_ROWS = 16
QUANTILES = (("min", 0.0), ("median", 0.5), ("p90", 0.9), ("max", 1.0))


def order_statistic(values: Sequence[float], q: float) -> float:
    """The value of rank ceil(q * n) (1-based; the minimum for q = 0) of the sorted values: one of the values
    itself (an int stays an int), never an interpolation."""
    xs = sorted(values)
    return xs[max(0, math.ceil(q * len(xs)) - 1)] if xs else math.nan


def distribution(rows: Sequence[Mapping], fields: Sequence[str], label: str = "rank") -> list[dict]:
    """Rows "min", "median", "p90", "max" of each numeric field over ``rows`` (None where no row has a value)."""
    out = []
    for name, q in QUANTILES:
        row: dict = {label: name}
        for f in fields:
            vals = [r[f] for r in rows if isinstance(r.get(f), (int, float)) and not isinstance(r.get(f), bool) and r[f] == r[f]]
            row[f] = order_statistic(vals, q) if vals else None
        out.append(row)
    return out


def many(rows: Sequence[Mapping]) -> bool:
    return len(rows) > MAX_RANK_ROWS


def summarised(
    rows: Sequence[Mapping], fields: Sequence[str], worst: Callable[[Mapping], float], top: int, what: str
) -> tuple[list[dict], str, tuple[str, ...]]:
    """(rows to show, title suffix, notes) for a per-rank table of ``rows`` (each with a ``rank``): all of them up
    to MAX_RANK_ROWS; beyond, the distribution and the ``top`` rows largest by ``worst`` (``what`` names it)."""
    if not many(rows):
        return [dict(r) for r in rows], "", ()
    ranks = view.span([int(r["rank"]) for r in rows])
    picked = sorted(rows, key=lambda r: (-worst(r), int(r["rank"])))[:top]
    shown = [*distribution(rows, fields), *(dict(r) for r in picked)]
    note = (
        f"ranks {ranks}: min, median, p90 and max over the ranks (each column on its own), then the {len(picked)} "
        f"ranks with {what}; every rank in --format json"
    )
    return shown, f": ranks {ranks}", (note,)


def number(x) -> float:
    """A figure for ranking (a missing one ranks last)."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x else -math.inf
