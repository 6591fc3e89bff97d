"""Who hung, on which collective of which group, and why: the cross-rank reading of Flight Recorder rings.

Per process group, from each member's entries (collectives only: ``collective_seq_id`` numbers them per group,
from 1, identically on every member):

- the **last collective every member reached** (the smallest of the members' last sequence numbers), the ranks
  that entered the next one and those that **never reached** it (missing);
- which members **completed** it, where the backend records completion (NCCL; gloo records no state change);
- **mismatches**: members that disagree at one sequence number on the op, the sizes (not for all_to_all, whose
  splits may differ) or the dtypes;
- members that entered a collective **later than their peers' timeout** (the peers gave up waiting for them);
- members with **no dump** (the rank that crashed usually leaves none).

Each finding is an :class:`Evidence` naming ranks; the **suspects** are those ranks, each with its most direct
evidence first (``DIRECTNESS``: a rank missing from a collective its peers entered is named most directly, a
rank merely behind a majority that is itself behind least).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np
import pandas as pd

from ... import units
from ...model.flight import FlightRun
from .evidence import Evidence, suspects
from .groups import Group, run_groups
from .results import GroupState, HangReport
from .signatures import first_mismatch, mismatched


def collective_frame(run: FlightRun) -> pd.DataFrame:
    """The collectives (not point-to-point) with a sequence number, one row each, with their group key."""
    cols = run.entries.columns
    key = np.where(cols["pg_name"] != "", cols["pg_name"], cols["pg_desc"])  # group_key, on the arrays
    return pd.DataFrame({**{k: cols[k] for k in cols}, "key": key})


def analyze_hang(run: FlightRun, dim_map: Iterable[str] = ()) -> HangReport:
    groups = run_groups(run, dim_map)
    df = collective_frame(run)
    coll = df[(df["is_p2p"] != 1) & (df["seq"] >= 0)]
    # a ring whose oldest entry is not record 0 has wrapped: a group missing from it may have been dropped from it
    wrapped = {int(r) for r, first in df.groupby("rank")["record_id"].min().items() if first > 0}
    states, evidence, mismatches = [], [], []
    have = set(run.ranks)
    by_key = dict(tuple(coll.groupby("key", sort=False)))
    p2p_by_key = dict(tuple(df[df["is_p2p"] == 1].groupby("key", sort=False)))
    bad = mismatched(coll).set_index("key")
    empty = coll.iloc[:0]
    for g in groups:
        rows = by_key.get(g.name, empty)
        state, found = _group_state(g, rows, p2p_by_key.get(g.name, empty), have, wrapped)
        mism, mism_evidence = first_mismatch(g, rows, bad.loc[g.name]) if g.name in bad.index else ([], [])
        mismatches += mism
        stalled = _late(g, rows) + _not_started(g, rows, state)
        found += mism_evidence + stalled
        if stalled and state.status == "consistent":
            state = _with_status(state, "hang")
        if mism and state.status == "consistent":
            state = _with_status(state, "mismatch")
        states.append(state)
        evidence += found
    evidence += _absent(run, groups)
    evidence.sort(key=lambda ev: (ev.directness, ev.group, ev.seq))
    return HangReport(
        tuple(states),
        tuple(evidence),
        suspects(evidence),
        tuple(mismatches),
        run.ranks,
        run.expected_ranks,
        run.warnings,
        run.directory,
    )


def _with_status(state: GroupState, status: str) -> GroupState:
    return replace(state, status=status)


def _group_state(g: Group, rows: pd.DataFrame, p2p: pd.DataFrame, have: set[int], wrapped: set[int]):
    """The group's state and the evidence of its frontier: the last collective every member reached, and who
    entered the next one."""
    dumped = tuple(r for r in g.members if r in have)
    absent = tuple(r for r in g.members if r not in have)
    last_by = rows.groupby("rank")["seq"].max().to_dict()
    last = {r: int(last_by.get(r, -1 if r in wrapped else 0)) for r in dumped}
    known = {r: s for r, s in last.items() if s >= 0}
    reached = min(known.values(), default=0)
    ahead = max(known.values(), default=0) > reached
    entered = tuple(r for r, s in known.items() if s > reached) if ahead else ()
    missing = tuple(r for r, s in known.items() if s == reached) if ahead else ()
    at = rows[rows["seq"] == reached]
    completed = _completed(rows, at)
    evidence = _frontier(g, rows, reached, entered, missing) + _timed_out(g, at, reached, completed)
    hung = bool(missing or absent) or (completed is not None and reached > 0 and set(completed) != set(known))
    last_p2p = {int(r): int(s) for r, s in p2p.groupby("rank")["p2p_seq"].max().items()}
    state = GroupState(
        g, dumped, absent, last, reached, _what(at), reached + 1 if entered else -1, entered, missing, completed,
        "hang" if hung else "consistent", last_p2p,
    )  # fmt: skip
    return state, evidence


def _frontier(g: Group, rows: pd.DataFrame, reached: int, entered: tuple[int, ...], missing: tuple[int, ...]) -> list[Evidence]:
    """Members that never reached collective ``reached + 1``: named as missing when no more than those that
    entered it, else the few that entered are the odd ones (ahead) and the rest behind."""
    if not missing:
        return []
    head, nxt, seq = f"group {g.label()} [{g.dimension}]", _what(rows[rows["seq"] == reached + 1]), reached + 1
    if len(missing) <= len(entered):
        own = rows[(rows["seq"] == reached) & (rows["rank"] == missing[0])]
        text = (
            f"{head}: {_ranks(missing)} never reached collective {seq} ({nxt}) that {_ranks(entered)} entered; "
            f"{_their(missing)} last was {reached or 'none'}" + (f" ({_what(own)})" if reached else "")
        )
        return [Evidence("missing", g.name, g.dimension, seq, missing, text)]
    return [
        Evidence(
            "ahead",
            g.name,
            g.dimension,
            seq,
            entered,
            f"{head}: only {_ranks(entered)} entered collective {seq} ({nxt}); the other {len(missing)} members "
            f"stopped at {reached or 'none'}: an extra collective on {_ranks(entered)}?",
        ),
        Evidence(
            "behind", g.name, g.dimension, seq, missing, f"{head}: {_ranks(missing)} stopped at collective {reached or 'none'}"
        ),
    ]


def _timed_out(g: Group, at: pd.DataFrame, reached: int, completed: tuple[int, ...] | None) -> list[Evidence]:
    """Where states are recorded: members whose entry of the collective retired without completing (timed out)."""
    if completed is None:
        return []
    out = at[(at["retired"] == 1) & (at["state"].isin(["scheduled", "started"])) & (at["completed_ns"] < 0)]
    if out.empty:
        return []
    ranks = tuple(sorted(set(out["rank"].tolist())))
    text = f"group {g.label()} [{g.dimension}]: collective {reached} retired uncompleted on {_ranks(ranks)} (timed out)"
    return [Evidence("timed_out", g.name, g.dimension, reached, ranks, text)]


def _completed(rows: pd.DataFrame, at: pd.DataFrame) -> tuple[int, ...] | None:
    """Members whose entry of the collective is completed; None when no entry of the group records a state change."""
    recorded = rows["state"].isin(["started", "completed"]).any() or (rows["completed_ns"] > 0).any()
    if not recorded:
        return None
    done = at[(at["state"] == "completed") | (at["completed_ns"] > 0)]
    return tuple(sorted(set(done["rank"].tolist())))


def _late(g: Group, rows: pd.DataFrame) -> list[Evidence]:
    """Members that entered a collective after their peers' timeout had run out, at the first such collective."""
    timed = rows[rows["created_ns"] > 0]
    if timed.empty:
        return []
    first = timed.groupby("seq")["created_ns"].transform("min")
    lag_ms = (timed["created_ns"] - first) / 1e6
    earliest = timed.loc[timed.groupby("seq")["created_ns"].idxmin(), ["seq", "timeout_ms", "rank"]].set_index("seq")
    limit = timed["seq"].map(earliest["timeout_ms"])
    late = timed[(limit > 0) & (lag_ms > limit)]
    out = []
    for rank, sub in late.groupby("rank"):
        row = sub.sort_values("seq").iloc[0]
        seq = int(row["seq"])
        first_rank = int(earliest.loc[seq, "rank"])
        lag_us = (row["created_ns"] - timed.loc[timed["seq"] == seq, "created_ns"].min()) / 1e3
        timeout_us = float(earliest.loc[seq, "timeout_ms"]) * 1e3
        out.append(
            Evidence(
                "late",
                g.name,
                g.dimension,
                seq,
                (int(rank),),
                f"group {g.label()} [{g.dimension}]: rank {rank} entered collective {seq} ({row['op']}) "
                f"{units.duration(lag_us)} after rank {first_rank}, past the {units.duration(timeout_us)} timeout its "
                "peers waited",
            )
        )
    return out


def _not_started(g: Group, rows: pd.DataFrame, state: GroupState) -> list[Evidence]:
    """Where the backend records states: members still 'scheduled' on a collective that a peer has started."""
    if state.completed is None or state.reached_seq <= 0:
        return []
    at = rows[rows["seq"] == state.reached_seq]
    moving = at["state"].isin(["started", "completed"])
    stuck = tuple(sorted(set(at.loc[at["state"] == "scheduled", "rank"].tolist())))
    if not moving.any() or not stuck:
        return []
    return [
        Evidence(
            "not_started",
            g.name,
            g.dimension,
            state.reached_seq,
            stuck,
            f"group {g.label()} [{g.dimension}]: {_ranks(stuck)} never started collective {state.reached_seq} that "
            f"{_ranks(tuple(sorted(set(at.loc[moving, 'rank'].tolist()))))} started (still queued behind earlier work)",
        )
    ]


def _absent(run: FlightRun, groups: tuple[Group, ...]) -> list[Evidence]:
    out = []
    for rank in run.absent_ranks:
        mine = [g.label() for g in groups if rank in g.members]
        why = (
            "its dump was left out (unreadable or refused)"
            if rank in run.left_out_ranks
            else "no dump (a rank that crashed or was killed leaves none)"
        )
        where = f"; a member of {', '.join(mine)}" if mine else ""
        out.append(Evidence("absent", "", "", -1, (rank,), f"rank {rank}: {why}{where}"))
    return out


def _what(at: pd.DataFrame) -> str:
    """A collective as one member recorded it: op, input sizes, dtypes and the user's frame."""
    if at.empty:
        return ""
    row = at.iloc[0]
    parts = [row["op"] or "?", row["input_sizes"], row["input_dtypes"]]
    text = " ".join(str(p) for p in parts if p)
    return f"{text} at {row['frame']}" if row["frame"] else text


def _ranks(ranks: tuple[int, ...]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(str(r) for r in ranks)


def _their(ranks: tuple[int, ...]) -> str:
    return "its" if len(ranks) == 1 else "their"
