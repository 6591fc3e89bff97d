"""Cross-rank analysis: match collective instances across ranks, estimate clock offsets, split each rank's
time in a collective into wait (for the last peer) and transfer, rank the stragglers, compute bus bandwidth.

Matching: group collectives by (process group, ``Seq``) where every instance of the group has one, else by
order within the process group on each rank; point-to-point by (group, src, dst, order). Op and size must
agree: a mismatch is reported and never paired. Clock offsets (tracekit.analyzers.clocks) come from causality
bounds of matched collectives and are applied before any cross-rank number is computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .clocks import ClockOffset, estimate_offsets
from .instances import Instances

P2P_OPS = ("send", "recv")
SIZE_FREE_OPS = ("all_to_all",)  # uneven splits: sizes legitimately differ between ranks


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw = algbw × factor."""
    if n <= 1:
        return 1.0 if op in ("send", "recv", "broadcast", "send_recv") else 0.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True, slots=True)
class Straggler:
    rank: int
    last_arrivals: int
    instances: int
    mean_lateness_ns: float  # how much later than the next-latest peer, when last
    total_caused_wait_ns: float

    def to_dict(self) -> dict:
        return {"rank": self.rank, "last_arrivals": self.last_arrivals, "instances": self.instances,
                "mean_lateness_us": self.mean_lateness_ns / 1e3, "total_caused_wait_us": self.total_caused_wait_ns / 1e3}


@dataclass(frozen=True, slots=True)
class CrossRank:
    instances: Instances  # with match_id, wait_ns, transfer_ns, skew_ns, algbw_gbps, busbw_gbps filled
    offsets: tuple[ClockOffset, ...]
    stragglers: tuple[Straggler, ...]
    wait_by_rank_ns: dict
    mismatches: tuple[str, ...]
    matched: int

    def to_dict(self) -> dict:
        return {"clock_offsets": [o.to_dict() for o in self.offsets],
                "stragglers": [s.to_dict() for s in self.stragglers],
                "wait_by_rank_us": {str(r): w / 1e3 for r, w in self.wait_by_rank_ns.items()},
                "mismatches": list(self.mismatches), "matched": self.matched}


def _keys(df: pd.DataFrame) -> pd.Series:
    """The matching key of each instance (None where it cannot be matched)."""
    pg = df["pg_name"].where(df["pg_name"] != "", df["pg_ranks"])
    p2p = df["op"].isin(P2P_OPS)
    src = df["src_rank"].where(df["src_rank"] >= 0, df["rank"].where(df["op"] == "send", -1))
    dst = df["dst_rank"].where(df["dst_rank"] >= 0, df["rank"].where(df["op"] == "recv", -1))
    df = df.assign(pg=pg, src=src, dst=dst).sort_values("start_ns", kind="stable")
    # no process group (old traces), or a fused send_recv without a sequence number (NCCL's SendRecv kernel of
    # a pipeline stage pairs with an unknown peer): nothing safe to match on. A send_recv that carries its
    # group's Seq is a group-wide exchange (tracekit's ring step: every rank of the group takes part).
    matchable = (df["pg"] != "") & (df["op"] != "") & ((df["op"] != "send_recv") | (df["seq"] >= 0))
    coll = df[~p2p.loc[df.index] & matchable]
    use_seq = coll.groupby("pg")["seq"].transform(lambda s: bool((s >= 0).all()))
    order = coll.groupby(["rank", "pg"]).cumcount()
    idx = np.where(use_seq.astype(bool), coll["seq"], order)
    keys = pd.Series(None, index=df.index, dtype=object)
    keys.loc[coll.index] = ["c|%s|%s|%d" % (p, "s" if u else "o", i)
                            for p, u, i in zip(coll["pg"], use_seq.astype(bool), idx)]
    pp = df[p2p.loc[df.index] & matchable & (df["src"] >= 0) & (df["dst"] >= 0)]
    porder = pp.groupby(["rank", "pg", "src", "dst"]).cumcount()
    keys.loc[pp.index] = ["p|%s|%d|%d|%d" % t for t in zip(pp["pg"], pp["src"], pp["dst"], porder)]
    return keys.sort_index()


def _validate(df: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """Which keys form a valid match: >= 2 distinct ranks, each once; same op (send+recv for p2p); same size."""
    keyed = df[df["key"].notna()]
    if keyed.empty:
        return pd.Series(dtype=bool), []
    g = keyed.groupby("key")
    n = g["rank"].nunique()
    dup = g["rank"].size() != n
    ops = g["op"].agg(lambda s: tuple(sorted(s)))
    op_bad = ops.map(lambda t: len(set(t)) != 1 if t[0] not in P2P_OPS else t != ("recv", "send")).astype(bool)
    sizes = g["bytes"].agg(lambda s: len(set(v for v in s if v > 0)) > 1).astype(bool)
    size_bad = sizes & ~ops.map(lambda t: t[0] in SIZE_FREE_OPS).astype(bool)
    bad = (dup | op_bad | size_bad) & (n >= 2)
    msgs = []
    for key in bad[bad].index[:20]:
        rows = df[df["key"] == key]
        what = "rank appears twice" if dup[key] else "op differs" if op_bad[key] else "size differs"
        detail = ", ".join(f"rank {r}: {o} {b} B" for r, o, b in zip(rows["rank"], rows["op"], rows["bytes"]))
        msgs.append(f"collective {key.split('|', 1)[1]} not paired ({what}): {detail}")
    if bad.sum() > 20:
        msgs.append(f"... and {int(bad.sum()) - 20} more unpaired collectives")
    return (n >= 2) & ~bad, msgs


def cross_rank(inst: Instances, ranks: list[int], align_clocks: bool = True) -> CrossRank:
    """Match, align clocks, and compute wait/transfer, stragglers and bandwidth for every instance."""
    df = pd.DataFrame({k: v for k, v in inst.columns.items()})
    df["key"] = _keys(df) if len(df) else pd.Series(dtype=object)
    valid, mismatches = _validate(df) if len(df) else (pd.Series(dtype=bool), [])
    good = valid[valid].index
    codes = pd.Series(np.arange(len(good)), index=good)
    df["match"] = df["key"].map(codes).fillna(-1).astype(np.int64)
    offsets, clock_warnings = estimate_offsets(df, ranks) if align_clocks and len(df) else ({}, [])
    mismatches += clock_warnings
    unaligned = [r for r in ranks if r not in offsets and (df["rank"] == r).any() and (df["match"] >= 0).any()]
    if align_clocks and unaligned and len(offsets) > 0:
        mismatches.append(f"ranks {unaligned}: no matched collective with the reference rank; clocks not aligned")
    shift = df["rank"].map({r: o.offset_ns for r, o in offsets.items()}).fillna(0.0)
    start, end = df["start_ns"] - shift, df["end_ns"] - shift
    m = df["match"] >= 0
    grp = start[m].groupby(df["match"][m])
    last = grp.transform("max")
    wait = (last - start[m]).clip(lower=0).clip(upper=(end - start)[m])
    transfer = (end[m] - last).clip(lower=0)
    df["wait_ns"], df["transfer_ns"] = np.nan, np.nan
    df.loc[m, "wait_ns"], df.loc[m, "transfer_ns"] = wait, transfer
    df["skew_ns"] = np.nan
    df.loc[m, "skew_ns"] = last - grp.transform("min")
    df["algbw_gbps"], df["busbw_gbps"] = _bandwidth(df)
    stragglers = _stragglers(df, start, m)
    wait_by_rank = {int(r): float(w) for r, w in df.groupby("rank")["wait_ns"].sum(min_count=1).items() if w == w}
    cols = {k: df[k].to_numpy() for k in inst.columns}
    for k in ("wait_ns", "transfer_ns", "skew_ns", "algbw_gbps", "busbw_gbps"):
        cols[k] = df[k].to_numpy(dtype=np.float64)
    cols["match_id"] = df["match"].to_numpy()
    return CrossRank(Instances(cols), tuple(offsets[r] for r in sorted(offsets)), stragglers, wait_by_rank,
                     tuple(mismatches), int(len(good)))


def _bandwidth(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """algbw = bytes / transfer time (GB/s = bytes/ns); busbw with the nccl-tests factor. NaN without a
    transfer time (instance not matched across ranks) or without a size."""
    n = df["group_size"].where(df["group_size"] > 0, df["pg_ranks"].map(lambda s: len(str(s).strip("[]").split(","))
                                                                        if s else 0))
    t = df["transfer_ns"].where(df["transfer_ns"] > 0)
    algbw = (df["bytes"].where(df["bytes"] > 0) / t).to_numpy(dtype=np.float64)
    factor = np.array([bus_factor(o, int(k)) for o, k in zip(df["op"], n)], dtype=np.float64)
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
    per = pd.DataFrame({"rank": last["rank"], "late": last["start"] - second.reindex(last.index),
                        "caused": caused.reindex(last.index)})
    involved = sub.groupby("rank")["match"].nunique()
    out = []
    for rank, g in per.groupby("rank"):
        out.append(Straggler(int(rank), len(g), int(involved.get(rank, 0)), float(g["late"].mean()),
                             float(g["caused"].sum())))
    # the straggler is the rank that made its peers wait longest; how often it came last breaks ties
    return tuple(sorted(out, key=lambda s: (-s.total_caused_wait_ns, -s.last_arrivals)))
