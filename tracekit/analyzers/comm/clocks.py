"""Clock offsets between ranks from matched collectives and send/recv pairs, with their uncertainty.

Causality bounds each pair's offset: in a collective whose result depends on every rank's input (all_reduce,
all_gather, reduce_scatter, all_to_all, barrier) no rank can finish before every peer has started. For rank b
against reference rank a, with θ = (b's clock − a's clock), each matched instance gives

    start_b − end_a  <=  θ  <=  end_b − start_a

and all instances together give the feasible interval [lo, hi]. The point estimate is the median difference
of matched end times (collective ends are nearly simultaneous on GPUs), clipped into [lo, hi] (on a loaded
CPU host gloo span ends jitter by milliseconds; the bounds stay exact). ``spread`` is the largest distance from
the estimate to either bound: the true offset is within ``spread`` of the estimate. The estimate moves exactly
with a shift of one rank's clock, so shifting a trace changes no cross-rank number. Contradictory bounds
(lo > hi: drift, or pairing gone wrong) fall back to the unclipped median, with a warning. Offsets chain
through ranks that share collectives with an already aligned rank.

A matched send/recv pair bounds θ on one side only (the receive cannot complete before the send started; the
send may finish into a buffer before the receive is posted): a send a → b gives θ <= end_recv_b − start_send_a,
a send b → a gives θ >= start_send_b − end_recv_a. A pipeline sends both ways (activations forward, gradients
back), so the pairs of two ranks give [lo, hi] as collectives do, and the estimate is again the median end
difference clipped into it. Send/recv pairs are used only to reach ranks that no chain of collectives reaches
(a pipeline's stages): where collectives connect ranks their offsets are unchanged. Pairs in one direction
only leave the interval open on one side: no offset with a claimed bound exists, so such a rank stays
unaligned, with a warning.

An offset claims no more than it knows (``within_bounds``): one no larger than its own spread (the estimate's
error bound) is not applied -- the clocks agree within ±spread, and correcting by an amount the data cannot tell
from 0 would only move every cross-rank figure by noise. It is kept as ``estimate_ns`` with ``applied`` False,
and its rank's times stay as they are. Shifting one rank's clock by more than the spread still moves the applied
offset by exactly the shift.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

SYNC_END_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier", "all_reduce_coalesced")
P2P_OPS = ("send", "recv")


@dataclass(frozen=True, slots=True)
class ClockOffset:
    rank: int
    offset_ns: float  # subtract from the rank's times to put it on the reference rank's clock
    spread_ns: float  # half-width of the causality interval (summed along the chain)
    matched: int
    # "median-ends", "clipped" (median outside the bounds), "unbounded", "reference"; "p2p-" before the first
    # three where the rank was reached over send/recv pairs
    method: str = "median-ends"
    applied: bool = True  # False: |estimate| <= spread, the clocks agree within the spread; offset_ns is 0
    estimate_ns: float | None = None  # the estimate itself (= offset_ns where applied)

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "offset_us": self.offset_ns / 1e3,
            "spread_us": self.spread_ns / 1e3,
            "matched": self.matched,
            "method": self.method,
            "applied": self.applied,
            "estimate_us": (self.offset_ns if self.estimate_ns is None else self.estimate_ns) / 1e3,
        }


def within_bounds(offsets: dict[int, ClockOffset]) -> dict[int, ClockOffset]:
    """The offsets as applied: one no larger than its own spread is not (offset 0, ``applied`` False), its
    estimate kept; the reference and the others as they are."""
    out = {}
    for r, o in offsets.items():
        if o.method != "reference" and abs(o.offset_ns) <= o.spread_ns:
            out[r] = replace(o, offset_ns=0.0, applied=False, estimate_ns=o.offset_ns)
        else:
            out[r] = replace(o, estimate_ns=o.offset_ns)
    return out


def _pair_edges(df: pd.DataFrame) -> pd.DataFrame:
    """Per (reference rank a, rank b): causality bounds, median end difference and count."""
    m = df[(df["match"] >= 0) & df["op"].isin(SYNC_END_OPS)]
    ref_rank = m.groupby("match")["rank"].transform("min")
    is_ref = m["rank"] == ref_rank
    ref = m[is_ref].drop_duplicates("match").set_index("match")[["start_ns", "end_ns"]]
    other = m[~is_ref].merge(ref, left_on="match", right_index=True, how="left", suffixes=("", "_a"))
    other = other.assign(
        a=ref_rank[~is_ref],
        lo=other["start_ns"] - other["end_ns_a"],
        hi=other["end_ns"] - other["start_ns_a"],
        d=other["end_ns"] - other["end_ns_a"],
    )
    return other.groupby(["a", "rank"]).agg(lo=("lo", "max"), hi=("hi", "min"), d=("d", "median"), n=("d", "size")).reset_index()


def _p2p_edges(df: pd.DataFrame) -> pd.DataFrame:
    """Per rank pair (a < b) of matched send/recv pairs: the one-sided bounds of θ (−inf/inf where no pair
    runs that way), the median end difference (b − a) and the count. Validation made each match one send and
    one receive on two ranks."""
    m = df[(df["match"] >= 0) & df["op"].isin(P2P_OPS)]
    cols = ["match", "rank", "start_ns", "end_ns"]
    send, recv = (m.loc[m["op"] == op, cols].drop_duplicates("match") for op in P2P_OPS)
    p = send.merge(recv, on="match", how="inner", suffixes=("_s", "_r"))
    p = p[p["rank_s"] != p["rank_r"]]
    fwd = (p["rank_s"] < p["rank_r"]).to_numpy()  # a sends to b: an upper bound
    bound = (p["end_ns_r"] - p["start_ns_s"]).to_numpy(np.float64)  # θ(r − s) <= end_r − start_s
    d = (p["end_ns_r"] - p["end_ns_s"]).to_numpy(np.float64)
    e = pd.DataFrame(
        {
            "a": np.where(fwd, p["rank_s"], p["rank_r"]),
            "rank": np.where(fwd, p["rank_r"], p["rank_s"]),
            "lo": np.where(fwd, -np.inf, -bound),
            "hi": np.where(fwd, bound, np.inf),
            "d": np.where(fwd, d, -d),
        }
    )
    return e.groupby(["a", "rank"]).agg(lo=("lo", "max"), hi=("hi", "min"), d=("d", "median"), n=("d", "size")).reset_index()


def _edges(pairs: pd.DataFrame, prefix: str, what: str) -> tuple[dict[int, list], dict[tuple[int, int], str]]:
    """Adjacency: rank -> [(peer, θ(peer − rank), spread, count, method)], the two-sided pairs only; and a
    warning per (a, b) pair whose bounds contradict each other."""
    edges: dict[int, list] = {}
    warnings: dict[tuple[int, int], str] = {}
    for row in pairs.itertuples(index=False):
        a, b, lo, hi, d, n = int(row.a), int(row.rank), float(row.lo), float(row.hi), float(row.d), int(row.n)
        if math.isinf(lo) or math.isinf(hi):
            continue
        if lo <= hi:
            est = min(max(d, lo), hi)
            method, spread = ("median-ends" if est == d else "clipped"), max(est - lo, hi - est)
        else:
            method, est, spread = "unbounded", d, lo - hi
            warnings[(a, b)] = (
                f"rank {b} vs rank {a}: {what} timings contradict any single clock offset "
                f"(bounds {lo / 1e3:.1f} > {hi / 1e3:.1f} µs; clock drift?); used the median of "
                "matched end differences"
            )
        edges.setdefault(a, []).append((b, est, spread, n, prefix + method))
        edges.setdefault(b, []).append((a, -est, spread, n, prefix + method))
    return edges, warnings


def estimate_offsets(df: pd.DataFrame, ranks: list[int]) -> tuple[dict[int, ClockOffset], list[str]]:
    if not ranks:
        return {}, []
    coll, coll_warnings = _edges(_pair_edges(df), "", "collective")
    warnings = list(coll_warnings.values())
    p2p_pairs = _p2p_edges(df)
    p2p, p2p_warnings = _edges(p2p_pairs, "p2p-", "send/recv")
    out = {ranks[0]: ClockOffset(ranks[0], 0.0, 0.0, 0, "reference")}

    links: list = []  # heap of send/recv links out of the aligned ranks

    def chain(start: int) -> None:  # breadth first over collectives, the best-matched peer first
        todo = deque([start])
        while todo:
            a = todo.popleft()
            # a consistent link before a contradictory one (whose "spread" is how far its bounds cross, no bound),
            # then the least summed spread, then the most pairs
            for b, est, spread, n, method in p2p.get(a, ()):
                heapq.heappush(links, (method.endswith("unbounded"), out[a].spread_ns + spread, -n, a, b, est, method))
            for b, est, spread, n, method in sorted(coll.get(a, ()), key=lambda t: -t[3]):
                if b not in out:
                    out[b] = ClockOffset(int(b), out[a].offset_ns + est, out[a].spread_ns + spread, n, method)
                    todo.append(b)

    chain(ranks[0])
    used: set[tuple[int, int]] = set()
    while links:  # then the tightest send/recv link from an aligned rank to an unaligned one, and its collectives
        _, total, negn, a, b, est, method = heapq.heappop(links)
        if b in out:
            continue
        out[b] = ClockOffset(int(b), out[a].offset_ns + est, total, -negn, method)
        used.add((min(a, b), max(a, b)))
        chain(b)
    warnings += [w for pair, w in p2p_warnings.items() if pair in used]  # a link not used moves no number
    for row in p2p_pairs.itertuples(index=False):
        a, b = int(row.a), int(row.rank)
        if (a in out) != (b in out) and (math.isinf(row.lo) or math.isinf(row.hi)):
            warnings.append(
                f"rank {b if a in out else a} vs rank {a if a in out else b}: send/recv pairs run one "
                "way only, which bounds the clock offset on one side; clocks not aligned over them"
            )
    return out, warnings
