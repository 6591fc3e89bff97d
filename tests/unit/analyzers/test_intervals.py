"""Interval algebra against a brute-force oracle on an integer time grid."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracekit.analyzers import intervals as iv

spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=25)


def _grid(pairs, n=80):
    g = np.zeros(n, bool)
    for s, d in pairs:
        g[s : s + d] = True
    return g


def _arr(pairs):
    return np.array([p[0] for p in pairs], np.int64), np.array([p[0] + p[1] for p in pairs], np.int64)


def _grid_of(u, n=80):
    return _grid([(int(s), int(e - s)) for s, e in zip(*u)], n)


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_union_intersect_subtract_match_the_grid(a, b):
    ua, ub = iv.union(*_arr(a)), iv.union(*_arr(b))
    ga, gb = _grid(a), _grid(b)
    assert (_grid_of(ua) == ga).all() and iv.length(ua) == ga.sum()
    assert np.all(ua[0][1:] > ua[1][:-1]), "a union is sorted and disjoint (no touching pieces)"
    assert (_grid_of(iv.intersect(ua, ub)) == (ga & gb)).all()
    assert (_grid_of(iv.subtract(ua, ub)) == (ga & ~gb)).all()
    assert iv.length(iv.intersect(ua, ub)) + iv.length(iv.subtract(ua, ub)) == iv.length(ua)


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_overlap_each_and_windows(a, q):
    ua, ga = iv.union(*_arr(a)), _grid(a)
    qs, qe = _arr(q)
    got = iv.overlap_each(ua, qs, qe)
    assert got.tolist() == [int(ga[s:e].sum()) for s, e in zip(qs, qe)]


@settings(max_examples=200, deadline=None)
@given(st.lists(spans, min_size=1, max_size=4), st.integers(1, 3))
def test_at_least_counts_streams(streams, k):
    count = sum(_grid(s).astype(int) for s in streams)
    us = [iv.union(*_arr(s)) for s in streams]
    got = iv.at_least(np.concatenate([u[0] for u in us]), np.concatenate([u[1] for u in us]), k)
    assert (_grid_of(got) == (count >= k)).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 3), st.integers(0, 60), st.integers(0, 15)), max_size=30))
def test_union_by_group_equals_union_of_each_group_and_ignores_order(rows):
    keys = np.array([r[0] for r in rows], np.int64)
    s = np.array([r[1] for r in rows], np.int64)
    e = s + np.array([r[2] for r in rows], np.int64)
    g, us, ue = iv.union_by_group(keys, s, e)
    for key in set(keys.tolist()):
        ref = iv.union(s[keys == key], e[keys == key])
        assert us[g == key].tolist() == ref[0].tolist() and ue[g == key].tolist() == ref[1].tolist()
    perm = np.random.default_rng(0).permutation(len(rows))
    g2, us2, ue2 = iv.union_by_group(keys[perm], s[perm], e[perm])
    assert g2.tolist() == g.tolist() and us2.tolist() == us.tolist() and ue2.tolist() == ue.tolist()


def test_absolute_nanosecond_times_do_not_overflow():
    base = 1_711_964_646_000_000_000
    keys = np.array([0, 1, 1]), np.array([base, base + 5, base + 7]), np.array([base + 10, base + 8, base + 20])
    g, s, e = iv.union_by_group(*keys)
    assert g.tolist() == [0, 1] and (s - base).tolist() == [0, 5] and (e - base).tolist() == [10, 20]
    assert iv.sum_by_key(g, e - s, np.array([1, 0, 7])).tolist() == [15, 10, 0]
