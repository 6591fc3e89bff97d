"""Cross-rank analysis: match collective instances across ranks, estimate clock offsets, split each rank's
time in a collective into wait (for the last peer) and transfer, rank the stragglers, compute bus bandwidth.

Matching: group collectives by (process group, ``Seq``) where every instance of the group has one, else by
order within the process group on each rank; point-to-point by (group, src, dst, order). Op and size must
agree: a mismatch is reported and never paired. Clock offsets (tracekit.analyzers.comm.clocks) come from causality
bounds of matched collectives (and of send/recv pairs where no collective links ranks) and are applied before
any cross-rank number is computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .clocks import ClockOffset, estimate_offsets, within_bounds
from .instances import Instances
from .matching import match_keys, validate

_ONE_WAY = ("send", "recv", "send_recv", "broadcast", "reduce")  # the message crosses the bus once: factor 1
_SPREAD = ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter")  # (n-1)/n of it leaves each rank


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw = algbw × factor (all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all, gather,
    scatter (n−1)/n; send/recv, broadcast, reduce 1). NaN where it is not defined: a collective op over a group
    of unknown size (n < 1) or of one rank (no byte crosses a bus), or an op without a bus model (barrier,
    dispatch, combine, notify, an unknown op). NaN is written null and printed —, never 0."""
    if op in _ONE_WAY:
        return 1.0
    if n < 2:
        return math.nan
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in _SPREAD:
        return (n - 1) / n
    return math.nan


@dataclass(frozen=True, slots=True)
class Straggler:
    rank: int
    last_arrivals: int
    instances: int
    mean_lateness_ns: float  # how much later than the next-latest peer, when last
    total_caused_wait_ns: float

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "last_arrivals": self.last_arrivals,
            "instances": self.instances,
            "mean_lateness_us": self.mean_lateness_ns / 1e3,
            "total_caused_wait_us": self.total_caused_wait_ns / 1e3,
        }


@dataclass(frozen=True, slots=True)
class CrossRank:
    instances: Instances  # with match_id, wait_ns, transfer_ns, skew_ns, algbw_gbps, busbw_gbps filled
    offsets: tuple[ClockOffset, ...]
    stragglers: tuple[Straggler, ...]
    wait_by_rank_ns: dict
    mismatches: tuple[str, ...]
    matched: int

    def to_dict(self) -> dict:
        return {
            "clock_offsets": [o.to_dict() for o in self.offsets],
            "stragglers": [s.to_dict() for s in self.stragglers],
            "wait_by_rank_us": {str(r): w / 1e3 for r, w in self.wait_by_rank_ns.items()},
            "mismatches": list(self.mismatches),
            "matched": self.matched,
        }


def _match(cols: Mapping[str, np.ndarray]) -> tuple[np.ndarray, int, list[str]]:
    """Each instance's match number (-1 where unpaired), the number of matches, and the mismatch messages.
    Match numbers follow the text order of the keys."""
    keys = match_keys(cols)
    verdict = validate(keys, cols)
    good = keys.in_text_order(np.flatnonzero(verdict.valid))
    number = np.full(len(keys), -1, np.int64)
    number[good] = np.arange(len(good))
    match = np.where(keys.ids >= 0, number[np.maximum(keys.ids, 0)], -1) if len(keys) else np.full(len(cols["start_ns"]), -1)
    bad = np.flatnonzero(verdict.bad)
    msgs = []
    for key in keys.in_text_order(bad)[:20]:
        rows = np.flatnonzero(keys.ids == key)
        detail = ", ".join(f"rank {r}: {o} {b} B" for r, o, b in zip(cols["rank"][rows], cols["op"][rows], cols["bytes"][rows]))
        msgs.append(f"collective {keys.text(int(key)).split('|', 1)[1]} not paired ({verdict.what[key]}): {detail}")
    if len(bad) > 20:
        msgs.append(f"... and {len(bad) - 20} more unpaired collectives")
    return match.astype(np.int64), len(good), msgs


_FIGURE_COLUMNS = ("rank", "op", "start_ns", "end_ns", "bytes", "group_size", "pg_members", "pg_desc")


def cross_rank(inst: Instances, ranks: list[int], align_clocks: bool = True, world_size: int = 0) -> CrossRank:
    """Match, align clocks, and compute wait/transfer, stragglers and bandwidth for every instance.
    ``world_size``: the run's, the size of the world group a trace without process groups is assumed to use."""
    # the columns the figures below read, not a copy of every instance column (at 1.25 M instances the frame of
    # all twenty, and the arrays taken back out of it for matching, were 0.6 GB at the analysis's peak)
    df = pd.DataFrame({k: inst.columns[k] for k in _FIGURE_COLUMNS})
    df["match"], matched, mismatches = _match(inst.columns) if len(df) else (np.zeros(0, np.int64), 0, [])
    offsets, clock_warnings = estimate_offsets(df, ranks) if align_clocks and len(df) else ({}, [])
    offsets = within_bounds(offsets)  # an offset inside its own error bound is not applied
    mismatches += clock_warnings
    unaligned = [r for r in ranks if r not in offsets and (df["rank"] == r).any() and (df["match"] >= 0).any()]
    if align_clocks and unaligned and len(offsets) > 0:
        mismatches.append(f"ranks {unaligned}: no matched collective with the reference rank; clocks not aligned")
    if align_clocks and len(ranks) > 1 and len(offsets) < 2:
        why = (
            "no collectives in the traces"
            if df.empty
            else "none paired"
            if not (df["match"] >= 0).any()
            else "only one-sided ops, or point-to-point pairs running one way, paired: they bound no clock offset"
        )
        mismatches.append(
            f"clock alignment impossible: no all_reduce/all_gather/reduce_scatter/all_to_all/barrier "
            f"nor send/recv pairs both ways matched across ranks ({why}); no cross-rank wait, skew or "
            "straggler is computed. If the ranks share one clock (one host), --no-align-clocks computes them "
            "on the raw times"
        )
    if align_clocks and len(df):  # never mix clocks: a match with an unaligned rank gives no cross-rank figure
        unaligned_match = df.loc[(df["match"] >= 0) & ~df["rank"].isin(list(offsets)), "match"].unique()
        df.loc[df["match"].isin(unaligned_match), "match"] = -1
    shift = df["rank"].map({r: o.offset_ns for r, o in offsets.items()}).fillna(0.0)
    # from the earliest start in integers first: epoch-scale ns as float64 are 256 ns apart, which quantised every
    # wait and transfer (a 31 µs broadcast's transfer by up to 1 %)
    origin = int(df["start_ns"].min()) if len(df) else 0
    start, end = (df["start_ns"] - origin) - shift, (df["end_ns"] - origin) - shift
    m = df["match"] >= 0
    grp = start[m].groupby(df["match"][m])
    last = grp.transform("max")
    wait = (last - start[m]).clip(lower=0).clip(upper=(end - start)[m])
    transfer = (end[m] - last).clip(lower=0)
    df["wait_ns"], df["transfer_ns"] = np.nan, np.nan
    df.loc[m, "wait_ns"], df.loc[m, "transfer_ns"] = wait, transfer
    df["skew_ns"] = np.nan
    df.loc[m, "skew_ns"] = last - grp.transform("min")
    df["algbw_gbps"], df["busbw_gbps"] = _bandwidth(df, world_size)
    stragglers = _stragglers(df, start, m)
    wait_by_rank = {int(r): float(w) for r, w in df.groupby("rank")["wait_ns"].sum(min_count=1).items() if w == w}
    cols = dict(inst.columns)  # the instances' own arrays: only the cross-rank columns are new
    for k in ("wait_ns", "transfer_ns", "skew_ns", "algbw_gbps", "busbw_gbps"):
        cols[k] = df[k].to_numpy(dtype=np.float64)
    cols["match_id"] = df["match"].to_numpy()
    return CrossRank(
        Instances(cols), tuple(offsets[r] for r in sorted(offsets)), stragglers, wait_by_rank, tuple(mismatches), matched
    )


def group_sizes(df: pd.DataFrame, world_size: int = 0) -> np.ndarray:
    """Each instance's group size n for the bus factor, from the best evidence there is: the group size the
    trace records (``Group size``, pg_config's size), else its member ranks (pg_config's or the event's
    ``Process Group Ranks``), else -- for a collective put on the world group because the trace names no groups
    (``default_pg`` without members) -- the run's world size, else the number of ranks the instance was
    matched across (a lower bound: ranks not loaded are not counted); 0 where none is known."""
    listed = np.fromiter((len(m) for m in df["pg_members"]), dtype=np.int64, count=len(df))
    n = np.where(df["group_size"] > 0, df["group_size"], listed).astype(np.int64)
    assumed = (n <= 0) & (df["pg_desc"] == "default_pg").to_numpy() & (world_size > 1)
    n[assumed] = world_size
    if "match" in df and (n <= 0).any():
        m = df["match"].to_numpy()
        matched = df["rank"].groupby(df["match"]).transform("nunique").to_numpy()
        take = (n <= 0) & (m >= 0)
        n[take] = matched[take]
    return np.maximum(n, 0)


def _bandwidth(df: pd.DataFrame, world_size: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """algbw = bytes / transfer time (GB/s = bytes/ns); busbw with the nccl-tests factor for the group size n of
    ``group_sizes``. NaN without a transfer time (instance not matched across ranks), without a size, or where
    the factor is not defined (``bus_factor``): written null, never 0."""
    n = group_sizes(df, world_size)
    t = df["transfer_ns"].where(df["transfer_ns"] > 0)
    algbw = (df["bytes"].where(df["bytes"] > 0) / t).to_numpy(dtype=np.float64)
    ops, op_of = pd.factorize(df["op"], use_na_sentinel=False)
    pairs, inverse = np.unique(np.stack([ops, n]), axis=1, return_inverse=True) if len(n) else (np.zeros((2, 0)), [])
    per_pair = np.array([bus_factor(op_of[o], int(k)) for o, k in pairs.T], dtype=np.float64)
    factor = per_pair[np.asarray(inverse, np.int64).reshape(-1)]
    return algbw, algbw * factor


def _stragglers(df: pd.DataFrame, start: pd.Series, m: pd.Series) -> tuple[Straggler, ...]:
    if not m.any():
        return ()
    sub = pd.DataFrame({"match": df["match"][m], "rank": df["rank"][m], "start": start[m], "wait": df["wait_ns"][m]})
    sub = sub.sort_values(["match", "start"], kind="stable")
    last = sub.groupby("match").tail(1).set_index("match")
    second = sub.groupby("match")["start"].nth(-2)
    second = pd.Series(second.to_numpy(), index=sub.loc[second.index, "match"].to_numpy())
    caused = sub.groupby("match")["wait"].sum()
    per = pd.DataFrame(
        {"rank": last["rank"], "late": last["start"] - second.reindex(last.index), "caused": caused.reindex(last.index)}
    )
    involved = sub.groupby("rank")["match"].nunique()
    by = per.groupby("rank").agg(
        n=("late", "size"), late=("late", "mean"), caused=("caused", "sum")
    )  # one pass, not one per rank
    out = [
        Straggler(int(rank), int(n), int(involved.get(rank, 0)), float(late), float(caused))
        for rank, n, late, caused in zip(by.index, by["n"], by["late"], by["caused"])
    ]
    # the straggler is the rank that made its peers wait longest; how often it came last breaks ties
    return tuple(sorted(out, key=lambda s: (-s.total_caused_wait_ns, -s.last_arrivals)))
