"""Array helpers the analyzers share, where numpy's general routine is much slower than the answer needs.

- ``unique``: numpy 2.4's ``np.unique`` without ``return_*`` builds a hash table first; on hundreds of thousands
  of mostly distinct int64 keys (correlation ids) that costs ~0.3 s of CPU where a sort takes 2 ms.
- ``group_percentiles``: numpy's linear-interpolation percentile of every group of a sorted, grouped array in one
  pass, the same float ``np.percentile`` gives group by group (one call per group cost ~0.1 ms each, hundreds of
  groups per breakdown).
"""

from __future__ import annotations

import numpy as np


def unique(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` (sorted distinct values); integers and booleans by a sort and a neighbour comparison."""
    a = np.asarray(x).ravel()
    if a.dtype.kind not in "iub":  # floats (NaN equality), objects, strings: numpy's own rules
        return np.unique(a)
    s = np.sort(a)
    keep = np.ones(len(s), bool)
    keep[1:] = s[1:] != s[:-1]
    return s[keep]


def group_bounds(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ``codes`` sorted ascending: (start, count) of each run of equal codes."""
    if len(codes) == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    starts = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1))
    return starts, np.diff(np.append(starts, len(codes)))


def group_percentiles(values: np.ndarray, starts: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """Per group (``values[start:start + count]``, each sorted ascending, count >= 1): ``np.percentile(group, q)``
    with numpy's default linear method, bit for bit (its virtual index ``(n - 1) * q / 100``, its floor and
    neighbour, and its two-sided lerp: ``a + (b - a) * t``, or ``b - (b - a) * (1 - t)`` where ``t >= 0.5``)."""
    n = counts.astype(np.int64)
    vi = (n - 1) * (q / 100)
    prev = np.floor(vi)
    last = vi >= n - 1
    lo = np.where(last, n - 1, prev).astype(np.int64)
    hi = np.where(last, n - 1, prev + 1).astype(np.int64)
    gamma = np.where(last, vi - (-1.0), vi - prev)  # numpy sets the index to -1 first: a == b, so any t works
    a, b = values[starts + lo], values[starts + hi]
    diff = b - a
    out = a + diff * gamma
    upper = gamma >= 0.5
    out[upper] = (b - diff * (1 - gamma))[upper]
    return out.astype(np.float64)
