"""Clock offsets between ranks from matched collectives, with their uncertainty.

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
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import pandas as pd

SYNC_END_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier", "all_reduce_coalesced")


@dataclass(frozen=True, slots=True)
class ClockOffset:
    rank: int
    offset_ns: float  # subtract from the rank's times to put it on the reference rank's clock
    spread_ns: float  # half-width of the causality interval (summed along the chain)
    matched: int
    method: str = "median-ends"  # "median-ends", "clipped" (median outside the bounds), "unbounded", "reference"

    def to_dict(self) -> dict:
        return {"rank": self.rank, "offset_us": self.offset_ns / 1e3, "spread_us": self.spread_ns / 1e3,
                "matched": self.matched, "method": self.method}


def _pair_edges(df: pd.DataFrame) -> pd.DataFrame:
    """Per (reference rank a, rank b): causality bounds, median end difference and count."""
    m = df[(df["match"] >= 0) & df["op"].isin(SYNC_END_OPS)]
    ref_rank = m.groupby("match")["rank"].transform("min")
    is_ref = m["rank"] == ref_rank
    ref = m[is_ref].drop_duplicates("match").set_index("match")[["start_ns", "end_ns"]]
    other = m[~is_ref].merge(ref, left_on="match", right_index=True, how="left", suffixes=("", "_a"))
    other = other.assign(a=ref_rank[~is_ref], lo=other["start_ns"] - other["end_ns_a"],
                         hi=other["end_ns"] - other["start_ns_a"], d=other["end_ns"] - other["end_ns_a"])
    return other.groupby(["a", "rank"]).agg(lo=("lo", "max"), hi=("hi", "min"), d=("d", "median"),
                                            n=("d", "size")).reset_index()


def estimate_offsets(df: pd.DataFrame, ranks: list[int]) -> tuple[dict[int, ClockOffset], list[str]]:
    if not ranks:
        return {}, []
    edges: dict[int, list] = {}
    warnings: list[str] = []
    for row in _pair_edges(df).itertuples(index=False):
        a, b, lo, hi, d, n = int(row.a), int(row.rank), float(row.lo), float(row.hi), float(row.d), int(row.n)
        if lo <= hi:
            est = min(max(d, lo), hi)
            method, spread = ("median-ends" if est == d else "clipped"), max(est - lo, hi - est)
        else:
            method, est, spread = "unbounded", d, lo - hi
            warnings.append(f"rank {b} vs rank {a}: collective timings contradict any single clock offset "
                            f"(bounds {lo / 1e3:.1f} > {hi / 1e3:.1f} µs; clock drift?); used the median of "
                            "matched end differences")
        edges.setdefault(a, []).append((b, est, spread, n, method))
        edges.setdefault(b, []).append((a, -est, spread, n, method))
    out = {ranks[0]: ClockOffset(ranks[0], 0.0, 0.0, 0, "reference")}
    todo = deque(ranks[:1])
    while todo:
        a = todo.popleft()
        for b, est, spread, n, method in sorted(edges.get(a, ()), key=lambda t: -t[3]):
            if b not in out:
                out[b] = ClockOffset(int(b), out[a].offset_ns + est, out[a].spread_ns + spread, n, method)
                todo.append(b)
    return out, warnings
