"""Mismatches: members of a group that disagree, at one sequence number, on what the collective is.

Compared field by field, in this order: the op, the input and output sizes (not for all_to_all, whose splits may
differ from rank to rank), the input and output dtypes; a field a dump left absent is not compared. At the first
mismatched sequence number of a group, the ranks outside the strict majority are the odd ones; with no strict
majority (two ranks, two answers) every side is named: a dump cannot say which side is wrong. Later mismatches
of the same group are counted, not named: once a group is out of step, every later number pairs unrelated calls.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from .evidence import Evidence
from .groups import Group

FIELDS = ("op", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes")
SIZE_FREE_OPS = ("all_to_all", "all_to_allv", "alltoall", "alltoall_base")


def _differs(values: pd.Series) -> bool:
    return values[values != ""].nunique() > 1


def _field(sub: pd.DataFrame) -> str | None:
    """The first field on which the members' entries of one sequence number differ."""
    size_free = bool(sub["op"].isin(SIZE_FREE_OPS).any())
    for f in FIELDS:
        if size_free and f.endswith("_sizes"):
            continue
        if _differs(sub[f]):
            return f
    return None


def _odd(sub: pd.DataFrame, f: str) -> tuple[tuple[int, ...], str]:
    """The ranks outside the strict majority of ``f`` (all ranks without one), and the majority value."""
    values = {int(r): v for r, v in zip(sub["rank"], sub[f]) if v != ""}
    counts = Counter(values.values()).most_common()
    if len(counts) > 1 and counts[0][1] > counts[1][1]:
        major = counts[0][0]
        return tuple(sorted(r for r, v in values.items() if v != major)), major
    return tuple(sorted(values)), ""


def first_mismatches(g: Group, rows: pd.DataFrame):
    """``([mismatch dict], [Evidence])`` for the first mismatched sequence number of group ``g`` (``rows``: its
    collective entries, every member's)."""
    if rows.empty:
        return [], []
    several = rows.groupby("seq")["rank"].transform("nunique") > 1
    cand = rows[several]
    if cand.empty:
        return [], []
    bad = [int(s) for s, sub in cand.groupby("seq", sort=True) if _field(sub) is not None]
    if not bad:
        return [], []
    seq = bad[0]
    sub = cand[cand["seq"] == seq]
    f = _field(sub)
    assert f is not None
    odd, major = _odd(sub, f)
    by_rank = {str(int(r)): v for r, v in sorted(zip(sub["rank"], sub[f]))}
    mismatch = {
        "group": g.name,
        "desc": g.desc,
        "dimension": g.dimension,
        "seq": seq,
        "field": f,
        "by_rank": by_rank,
        "majority": major,
        "odd_ranks": list(odd),
        "later_mismatched": len(bad) - 1,
    }
    seen = ", ".join(f"rank {r}: {v or '?'}" for r, v in by_rank.items())
    who = f"ranks {', '.join(map(str, odd))}" if len(odd) > 1 else f"rank {odd[0]}"
    side = "" if major else " (no majority: every side named)"
    text = f"group {g.label()} [{g.dimension}]: collective {seq} differs in {f} on {who}{side}: {seen}"
    if len(bad) > 1:
        text += f"; {len(bad) - 1} later collectives differ too"
    return [mismatch], [Evidence("mismatch", g.name, g.dimension, seq, odd, text)]
