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


def _odd(sub: pd.DataFrame, f: str) -> tuple[tuple[int, ...], str]:
    """The ranks outside the strict majority of ``f`` (all ranks without one), and the majority value."""
    values = {int(r): v for r, v in zip(sub["rank"], sub[f]) if v != ""}
    counts = Counter(values.values()).most_common()
    if len(counts) > 1 and counts[0][1] > counts[1][1]:
        major = counts[0][0]
        return tuple(sorted(r for r, v in values.items() if v != major)), major
    return tuple(sorted(values)), ""


def mismatched(coll: pd.DataFrame) -> pd.DataFrame:
    """Per (group key, seq) with a mismatch: the first differing field (columns key, seq, field, later), one row
    per group: its first mismatched sequence number and how many later ones differ too. Vectorised: one groupby
    per field over every group at once."""
    if coll.empty:
        return pd.DataFrame(columns=["key", "seq", "field", "later"])
    df = coll[["key", "seq", "op", *FIELDS[1:]]].copy()
    free = df["op"].isin(SIZE_FREE_OPS).groupby([df["key"], df["seq"]]).transform("max")
    bad = {}
    for f in FIELDS:
        values = df[f].astype(object).where(df[f] != "")
        if f.endswith("_sizes"):
            values = values.where(~free)
        bad[f] = values.groupby([df["key"], df["seq"]]).nunique() > 1
    table = pd.DataFrame(bad)
    table = table[table.any(axis=1)]
    if table.empty:
        return pd.DataFrame(columns=["key", "seq", "field", "later"])
    rows = []
    for key, sub in table.groupby(level=0, sort=False):
        seqs = sub.index.get_level_values(1)
        first = int(seqs.min())
        flags = sub.loc[(key, first)]
        rows.append({"key": key, "seq": first, "field": next(f for f in FIELDS if flags[f]), "later": len(sub) - 1})
    return pd.DataFrame(rows)


def first_mismatch(g: Group, rows: pd.DataFrame, found: pd.Series):
    """``([mismatch dict], [Evidence])`` for group ``g``'s first mismatched sequence number (``found``: its row of
    :func:`mismatched`; ``rows``: the group's collective entries, every member's)."""
    seq, f, later = int(found["seq"]), str(found["field"]), int(found["later"])
    sub = rows[rows["seq"] == seq]
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
        "later_mismatched": later,
    }
    seen = ", ".join(f"rank {r}: {v or '?'}" for r, v in by_rank.items())
    who = f"ranks {', '.join(map(str, odd))}" if len(odd) > 1 else f"rank {odd[0]}"
    side = "" if major else " (no majority: every side named)"
    text = f"group {g.label()} [{g.dimension}]: collective {seq} differs in {f} on {who}{side}: {seen}"
    if later:
        text += f"; {later} later collectives differ too"
    return [mismatch], [Evidence("mismatch", g.name, g.dimension, seq, odd, text)]
