"""Interval algebra on numpy arrays: unions, intersections, differences, per-window clipping.

An interval set is a pair ``(starts, ends)`` of int64 arrays. A *union* is an interval set that is sorted,
disjoint and free of empty intervals; every function that returns a set returns a union. Everything is
O(n log n) (one sort) and vectorised: no Python loop over intervals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

Intervals = tuple[np.ndarray, np.ndarray]

_I64 = np.int64


def empty() -> Intervals:
    return np.empty(0, _I64), np.empty(0, _I64)


def _arrays(starts, ends) -> Intervals:
    s = np.asarray(starts, dtype=_I64).ravel()
    e = np.asarray(ends, dtype=_I64).ravel()
    if s.shape != e.shape:
        raise ValueError(f"intervals: {len(s)} starts but {len(e)} ends")
    return s, e


def union(starts, ends) -> Intervals:
    """The union of any intervals (unsorted, nested, overlapping, empty ones allowed)."""
    s, e = _arrays(starts, ends)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return empty()
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]


def length(u: Intervals) -> int:
    return int((u[1] - u[0]).sum())


def _segments(a: Intervals, b: Intervals):
    """Elementary segments between all boundaries of two unions, with the coverage of each."""
    pts = np.concatenate([a[0], a[1], b[0], b[1]])
    na, nb = len(a[0]), len(b[0])
    da = np.concatenate([np.ones(na, _I64), -np.ones(na, _I64), np.zeros(2 * nb, _I64)])
    db = np.concatenate([np.zeros(2 * na, _I64), np.ones(nb, _I64), -np.ones(nb, _I64)])
    order = np.argsort(pts, kind="stable")
    pts = pts[order]
    ca, cb = np.cumsum(da[order]), np.cumsum(db[order])
    return pts[:-1], pts[1:], ca[:-1], cb[:-1]


def _select(lo, hi, keep) -> Intervals:
    return union(lo[keep], hi[keep])


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """a ∩ b for two unions."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return empty()
    lo, hi, ca, cb = _segments(a, b)
    return _select(lo, hi, (ca > 0) & (cb > 0))


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """a \\ b for two unions."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return a
    lo, hi, ca, cb = _segments(a, b)
    return _select(lo, hi, (ca > 0) & (cb == 0))


def merge(*sets: Intervals) -> Intervals:
    """The union of several interval sets."""
    if not sets:
        return empty()
    return union(np.concatenate([s[0] for s in sets]), np.concatenate([s[1] for s in sets]))


def covered_until(u: Intervals, t) -> np.ndarray:
    """For each time in ``t``, how much of the union ``u`` lies before it: |u ∩ (-inf, t)|."""
    s, e = u
    t = np.asarray(t, dtype=_I64)
    if len(s) == 0:
        return np.zeros(t.shape, _I64)
    cum = np.concatenate([[0], np.cumsum(e - s)])
    i = np.searchsorted(s, t, side="right") - 1  # last interval starting at or before t
    ic = np.clip(i, 0, None)
    inside = np.clip(t - s[ic], 0, e[ic] - s[ic])
    return np.where(i < 0, 0, cum[ic] + inside)


def overlap_each(u: Intervals, starts, ends) -> np.ndarray:
    """For each query interval [starts[i], ends[i]), the length of its intersection with the union ``u``.
    Queries may overlap each other; one sort of ``u`` and a binary search per query."""
    s, e = _arrays(starts, ends)
    e = np.maximum(e, s)
    return covered_until(u, e) - covered_until(u, s)


def at_least(starts, ends, k: int) -> Intervals:
    """Where at least ``k`` of the given intervals are active at once (for distinct streams, pass each
    stream's union so that nesting within a stream does not count twice)."""
    s, e = _arrays(starts, ends)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return empty()
    pts = np.concatenate([s, e])
    delta = np.concatenate([np.ones(len(s), _I64), -np.ones(len(e), _I64)])
    order = np.lexsort((delta, pts))  # at equal times, ends (-1) before starts: touching is not overlap
    pts, count = pts[order], np.cumsum(delta[order])
    return _select(pts[:-1], pts[1:], count[:-1] >= k)


def _lay_out(keys, starts, ends):
    """Lay groups end to end on one time axis so that one vectorised pass handles all of them.
    Returns (shifted starts, shifted ends, unlay) or None when the axis would overflow int64."""
    k = np.asarray(keys, dtype=_I64).ravel()
    s, e = _arrays(starts, ends)
    inv, uniq = pd.factorize(k, sort=True)  # hashing, then a sort of the distinct keys only
    base = min(int(s.min()), int(e.min()))
    span = max(int(e.max()), int(s.max())) - base + 1
    if span * (len(uniq) + 1) >= 2**62:
        return None
    off = inv.astype(_I64) * span - base

    def unlay(us, ue):
        g = us // span
        return uniq[g], us - g * span + base, ue - g * span + base

    return s + off, e + off, unlay


def _by_group(fn, keys, starts, ends):
    k = np.asarray(keys, dtype=_I64).ravel()
    s, e = _arrays(starts, ends)
    if len(s) == 0:
        return np.empty(0, _I64), *empty()
    laid = _lay_out(k, s, e)
    if laid is None:  # too wide to lay end to end: one group at a time
        uniq = np.unique(k)
        parts = [fn(s[k == g], e[k == g]) for g in uniq]
        gk = np.concatenate([np.full(len(p[0]), g, _I64) for g, p in zip(uniq, parts)])
        return gk, np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    ls, le, unlay = laid
    return unlay(*fn(ls, le))


def union_by_group(keys, starts, ends) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union within each group (groups never merge). Returns (group key, starts, ends) of the pieces,
    sorted by key then start."""
    return _by_group(union, keys, starts, ends)


def at_least_by_group(keys, starts, ends, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``at_least`` within each group."""
    return _by_group(lambda s, e: at_least(s, e, k), keys, starts, ends)


def sum_by_key(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Sum ``values`` per key, returned in the order of ``wanted`` (0 for keys that never occur)."""
    wanted = np.asarray(wanted, dtype=_I64)
    if len(wanted) == 0:
        return np.zeros(0, _I64)
    order = np.argsort(wanted, kind="stable")
    pos = np.searchsorted(wanted[order], keys)
    pos_c = np.clip(pos, 0, len(wanted) - 1)
    hit = (pos < len(wanted)) & (wanted[order][pos_c] == keys)
    sums = np.zeros(len(wanted), dtype=np.asarray(values).dtype if len(values) else _I64)
    np.add.at(sums, order[pos_c[hit]], np.asarray(values)[hit])
    return sums


def length_in_windows(u: Intervals, win_starts, win_ends) -> np.ndarray:
    """|u ∩ W| for each window W = [win_starts[i], win_ends[i])."""
    return overlap_each(u, win_starts, win_ends)


def key_stride(n_groups: int, lo: int, *highs: int) -> np.int64:
    """The stride that packs (group, value) pairs into one sortable int64 key, ``group * stride + (value - lo)``,
    for values in ``[lo, max(highs)]`` and groups ``0 .. n_groups - 1``: one sort and one ``searchsorted`` then
    serve every group at once. Raises a one-line TraceFormatError when the keys would not fit in int64: the
    events then span more time than any trace holds (a timestamp far from the others, such as an event at ts 0)."""
    from ..errors import TraceFormatError

    stride = max([int(h) for h in highs] + [lo]) - lo + 1
    if stride * (max(n_groups, 1) + 1) >= 2**62:
        raise TraceFormatError(
            f"events span {stride / 1e9:,.0f} s: a timestamp far "
            "from the others (an event at ts 0?); the dependency graph cannot order them. Narrow "
            "the analysis with --window or fix the trace's timestamps"
        )
    return np.int64(stride)
