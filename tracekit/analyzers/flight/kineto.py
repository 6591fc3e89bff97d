"""Flight Recorder against Kineto traces of the same run: the same collectives, matched by FR's sequence numbers,
and whether the two say the same about waits and stragglers.

A Kineto instance carries its group's name and a sequence number (NCCL's ``Seq``, or the one tracekit's gloo
annotations count from 0 over the collectives they issue); FR numbers every collective of the group from 1. The
two differ by an offset per (rank, group): collectives nobody annotated (group set-up, ``all_gather_object``)
shift it. It is found as the most common difference between a Kineto instance's number and that of the last FR
entry its rank enqueued on the group before the instance started (wall clocks of one process), and every instance
then takes FR's number. A collective is *common* when each of its Kineto ranks found its FR entry under that
number and the ops agree (gloo runs a reduce-scatter as an all-reduce, tracekit's ring exchange as an
all-to-all).

Per dimension (and over all of them, "all"): the wait of every rank in the common collectives by both (Kineto:
from the worker's span start; FR: from the enqueue), their median difference, how often both name the same last
arriver, and the straggler each names (the rank whose late arrivals caused the most waiting). The FR figures over
the whole ring also hold the steps no profiler recorded (start-up, warm-up): only the common ones compare.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...model.flight import FlightRun
from .timing import instance_frame
from .timing_results import DimensionAgreement, KinetoAgreement

# tracekit's op name -> the FR op names that carry it out
SAME_OP = {
    "reduce_scatter": {"reduce_scatter", "all_reduce", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced"},
    "send_recv": {"all_to_all", "alltoall_base"},
    "all_to_all": {"all_to_all", "alltoall_base"},
    "all_gather": {"all_gather", "_allgather_base", "all_gather_into_tensor_coalesced", "allgather_into_tensor_coalesced"},
}


def _kineto_frame(instances) -> pd.DataFrame:
    cols = ("rank", "pg_name", "op", "seq", "start_ns", "wait_ns", "match_id", "dimension")
    k = pd.DataFrame({c: instances[c] for c in cols})
    return k[(k["match_id"] >= 0) & (k["seq"] >= 0) & (k["pg_name"] != "")].copy()


def _offsets(k: pd.DataFrame, fr: pd.DataFrame) -> dict[tuple[int, str], int]:
    out = {}
    for (rank, pg), kk in k.groupby(["rank", "pg_name"]):
        ff = fr[(fr["rank"] == rank) & (fr["key"] == pg)].sort_values("created_abs_ns")
        if ff.empty:
            continue
        at = np.searchsorted(ff["created_abs_ns"].to_numpy(np.int64), kk["start_ns"].to_numpy(np.int64), side="right") - 1
        ok = at >= 0
        if not ok.any():
            continue
        diff = ff["seq"].to_numpy()[at[ok]] - kk["seq"].to_numpy()[ok]
        values, counts = np.unique(diff, return_counts=True)
        out[(int(rank), str(pg))] = int(values[np.argmax(counts)])
    return out


def _same_op(kin: str, fr: str) -> bool:
    return kin == fr or fr in SAME_OP.get(kin, ())


def kineto_agreement(run: FlightRun, instances) -> KinetoAgreement:
    """How the Flight Recorder's figures agree with the Kineto analysis's ``instances`` (its matched collectives)."""
    fr = instance_frame(run)
    k = _kineto_frame(instances)
    offsets = _offsets(k, fr)
    k["fr_seq"] = [s + offsets.get((int(r), str(g)), -(10**12)) for r, g, s in zip(k["rank"], k["pg_name"], k["seq"])]
    m = k.merge(
        fr[["rank", "key", "seq", "op", "created_ns", "wait_ns", "members_seen"]].rename(
            columns={"seq": "fr_seq", "op": "fr_op", "wait_ns": "fr_wait_ns", "key": "pg_name"}
        ),
        on=["rank", "pg_name", "fr_seq"],
        how="left",
    )
    m["same_op"] = [isinstance(b, str) and _same_op(a, b) for a, b in zip(m["op"], m["fr_op"])]
    per_match = m.groupby("match_id").agg(
        n=("rank", "size"),
        found=("fr_wait_ns", "count"),
        ops=("same_op", "all"),
        seen=("members_seen", "max"),
        seqs=("fr_seq", "nunique"),
    )
    good = per_match[
        (per_match["n"] == per_match["found"])
        & per_match["ops"]
        & (per_match["seen"] == per_match["n"])
        & (per_match["seqs"] == 1)
    ]
    common = m[m["match_id"].isin(good.index)]
    dims = tuple(_dimension(str(d), sub) for d, sub in common.groupby("dimension"))
    if len(common):
        dims += (_dimension("all", common),)
    op_mismatch = int(((per_match["n"] == per_match["found"]) & ~per_match["ops"]).sum())
    return KinetoAgreement(
        dims,
        {f"{r}:{g}": o for (r, g), o in sorted(offsets.items())},
        len(good),
        int(k["match_id"].nunique()),
        op_mismatch,
    )


def _straggler(sub: pd.DataFrame, arrival: str, wait: str) -> int:
    """The rank whose late arrivals caused its peers the most waiting (-1: none waited)."""
    last = sub.loc[sub.groupby("match_id")[arrival].idxmax(), ["match_id", "rank"]].set_index("match_id")["rank"]
    caused = sub.groupby("match_id")[wait].sum().groupby(last).sum()
    return int(caused.idxmax()) if len(caused) and caused.max() > 0 else -1


def _dimension(dim: str, sub: pd.DataFrame) -> DimensionAgreement:
    diff = (sub["fr_wait_ns"] - sub["wait_ns"]).abs()
    last_k = sub.loc[sub.groupby("match_id")["start_ns"].idxmax(), ["match_id", "rank"]].set_index("match_id")["rank"]
    last_f = sub.loc[sub.groupby("match_id")["created_ns"].idxmax(), ["match_id", "rank"]].set_index("match_id")["rank"]
    agree = float((last_k == last_f.reindex(last_k.index)).mean()) if len(last_k) else float("nan")
    return DimensionAgreement(
        dim,
        int(sub["match_id"].nunique()),
        float(sub["wait_ns"].sum()),
        float(sub["fr_wait_ns"].sum()),
        float(diff.median()),
        agree,
        {int(r): (float(g["wait_ns"].sum()), float(g["fr_wait_ns"].sum())) for r, g in sub.groupby("rank")},
        _straggler(sub, "start_ns", "wait_ns"),
        _straggler(sub, "created_ns", "fr_wait_ns"),
    )
