"""Timing without a profiler: what the Flight Recorder's timestamps say about every collective, per group and
parallel dimension, in the words of the Kineto analysis.

Per collective (a group and its sequence number) and member rank, from the ring alone:

- **arrival** = ``time_created_ns`` (the collective was enqueued); the last member to arrive sets the start of
  the transfer, and a rank's **wait** = last arrival − its own arrival (DESIGN.md's definition, with enqueue
  times for the arrivals: on one host the ranks share the wall clock; across hosts these are NTP clocks,
  uncorrected, and the figures say so); **skew** = last − first arrival;
- **queueing delay** = ``time_discovered_started_ns − time_created_ns``, where the backend discovers starts
  (NCCL's watchdog; gloo records none);
- **duration** = ``duration_ms`` where the backend timed it (NCCL with ``TORCH_NCCL_ENABLE_TIMING=1``), and
  **transfer** = end − last arrival with end = the discovered start plus that duration;
- **interval** = the next collective's enqueue − this one's, on the same rank and group (always there), and
  **gap** = the next enqueue − this one's discovered completion (where completions are recorded).

**Stragglers** as the Kineto analysis ranks them: the last rank to arrive, how often, by how much it was later
than the next-latest peer, and the wait it caused its peers. Where durations are recorded, the **inversion
rule** names them too: in a blocking collective the late rank shows the *shortest* duration (it waits least).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ...model.flight import FlightRun
from ..comm.collectives import Straggler
from .groups import run_groups
from .hang import collective_frame
from .timing_results import DimensionTiming, FlightTiming, GroupTiming, Inversion


def instance_frame(run: FlightRun) -> pd.DataFrame:
    """One row per (rank, collective) with the timing columns (ns; NaN where the dump has no value)."""
    df = collective_frame(run)
    df = df[(df["is_p2p"] != 1) & (df["seq"] >= 0) & (df["key"] != "")].copy()
    # times as float ns from the first enqueue: float64 holds ~1e18 ns only to 256 ns, an offset of hours exactly
    df["created_abs_ns"] = df["created_ns"]
    stamps = df["created_ns"][df["created_ns"] > 0]
    t0 = int(stamps.min()) if len(stamps) else 0
    for col in ("created_ns", "started_ns", "completed_ns"):
        df[col] = (df[col] - t0).where(df[col] > 0).astype("float64")
    df["duration_ns"] = df["duration_ns"].where(df["duration_ns"] >= 0).astype("float64")
    df = df.sort_values(["key", "rank", "seq"], kind="stable")
    by = df.groupby(["key", "seq"])["created_ns"]
    df["members_seen"] = df.groupby(["key", "seq"])["rank"].transform("nunique")
    df["last_arrival_ns"] = by.transform("max")
    df["wait_ns"] = (df["last_arrival_ns"] - df["created_ns"]).where(df["members_seen"] > 1)
    df["skew_ns"] = (df["last_arrival_ns"] - by.transform("min")).where(df["members_seen"] > 1)
    df["queue_ns"] = df["started_ns"] - df["created_ns"]
    end = df["started_ns"] + df["duration_ns"]
    df["transfer_ns"] = (end - df["last_arrival_ns"]).clip(lower=0).where(df["members_seen"] > 1)
    nxt = df.groupby(["key", "rank"])["created_ns"].shift(-1)
    df["interval_ns"] = nxt - df["created_ns"]
    df["gap_ns"] = nxt - df["completed_ns"]
    return df


def stragglers(df: pd.DataFrame) -> tuple[Straggler, ...]:
    """By arrival, in the Kineto analysis's terms (tracekit.analyzers.comm.collectives.Straggler)."""
    sub = df[(df["members_seen"] > 1) & df["created_ns"].notna()].sort_values(["key", "seq", "created_ns"], kind="stable")
    if sub.empty:
        return ()
    g = sub.groupby(["key", "seq"])
    last = g.tail(1).set_index(["key", "seq"])
    second = g["created_ns"].nth(-2)
    second.index = pd.MultiIndex.from_frame(sub.loc[second.index, ["key", "seq"]])
    per = pd.DataFrame(
        {"rank": last["rank"], "late": last["created_ns"] - second.reindex(last.index), "caused": g["wait_ns"].sum()}
    )
    involved = sub.drop_duplicates(["key", "seq", "rank"]).groupby("rank").size()
    out = [
        Straggler(int(r), len(p), int(involved.get(r, 0)), float(p["late"].mean()), float(p["caused"].sum()))
        for r, p in per.groupby("rank")
    ]
    return tuple(sorted(out, key=lambda s: (-s.total_caused_wait_ns, -s.last_arrivals)))


def inversions(df: pd.DataFrame) -> tuple[Inversion, ...]:
    """Where durations are recorded: per rank, the collectives in which it had the shortest duration of its group
    (the late rank of a blocking collective), and by how much it was shorter than the mean of its peers."""
    sub = df[(df["members_seen"] > 1) & df["duration_ns"].notna()]
    sub = sub[sub.groupby(["key", "seq"])["duration_ns"].transform("count") > 1]
    if sub.empty:
        return ()
    idx = sub.groupby(["key", "seq"])["duration_ns"].idxmin()
    shortest = sub.loc[idx]
    mean_all = sub.groupby(["key", "seq"])["duration_ns"].agg(["sum", "count"]).loc[list(zip(shortest["key"], shortest["seq"]))]
    peers_mean = (mean_all["sum"].to_numpy() - shortest["duration_ns"].to_numpy()) / (mean_all["count"].to_numpy() - 1)
    shortest = shortest.assign(shorter=peers_mean - shortest["duration_ns"].to_numpy())
    out = [Inversion(int(r), len(s), float(s["shorter"].mean())) for r, s in shortest.groupby("rank")]
    return tuple(sorted(out, key=lambda i: (-i.shortest_count, i.rank)))


def _mean(s: pd.Series) -> float | None:
    s = s.dropna()
    return float(s.mean()) if len(s) else None


def _wait_by_rank(df: pd.DataFrame) -> dict[int, float]:
    return {int(r): float(w) for r, w in df.groupby("rank")["wait_ns"].sum(min_count=1).items() if w == w}


def _figures(df: pd.DataFrame) -> dict:
    inst = df.drop_duplicates(["key", "seq"])
    return {
        "instances": len(inst),
        "matched": int((inst["members_seen"] > 1).sum()),
        "wait_ns": float(df["wait_ns"].sum()),
        "wait_by_rank_ns": _wait_by_rank(df),
        "mean_skew_ns": _mean(inst["skew_ns"]),
        "mean_interval_ns": _mean(df["interval_ns"]),
        "mean_queue_ns": _mean(df["queue_ns"]),
        "mean_duration_ns": _mean(df["duration_ns"]),
        "mean_transfer_ns": _mean(df["transfer_ns"]),
        "mean_gap_ns": _mean(df["gap_ns"]),
    }


def analyze_timing(run: FlightRun, dim_map: Iterable[str] = (), top: int = 10) -> FlightTiming:
    groups = {g.name: g for g in run_groups(run, dim_map)}
    df = instance_frame(run)
    df["dimension"] = df["key"].map({k: g.dimension for k, g in groups.items()})
    per_group = tuple(
        GroupTiming(group=groups[k], **_figures(sub), stragglers=stragglers(sub), ops=tuple(sorted(set(sub["op"]) - {""})))
        for k, sub in df.groupby("key", sort=False)
        if k in groups
    )
    per_dim = tuple(
        DimensionTiming(dimension=str(dim), groups=tuple(sorted(set(sub["key"]))), **_figures(sub), stragglers=stragglers(sub))
        for dim, sub in df.groupby("dimension")
    )
    recorded = {
        "arrival": bool(df["created_ns"].notna().any()),
        "queue": bool(df["queue_ns"].notna().any()),
        "duration": bool(df["duration_ns"].notna().any()),
        "completion": bool(df["completed_ns"].notna().any()),
    }
    worst = df[df["members_seen"] > 1].drop_duplicates(["key", "seq"]).nlargest(top, "skew_ns")
    rows = tuple(_collective_row(df, k, int(s)) for k, s in zip(worst["key"], worst["seq"]))
    return FlightTiming(
        run.directory, run.ranks, per_group, per_dim, stragglers(df), inversions(df), recorded, rows, len(df), run.warnings
    )


def _collective_row(df: pd.DataFrame, key: str, seq: int) -> dict:
    sub = df[(df["key"] == key) & (df["seq"] == seq)]
    first = sub.loc[sub["created_ns"].idxmin()]
    last = sub.loc[sub["created_ns"].idxmax()]
    return {
        "group": key,
        "dimension": str(first["dimension"]),
        "seq": seq,
        "op": first["op"],
        "input_sizes": first["input_sizes"],
        "ranks": sorted(int(r) for r in sub["rank"]),
        "first_rank": int(first["rank"]),
        "last_rank": int(last["rank"]),
        "skew_ns": float(first["skew_ns"]),
        "wait_ns": float(sub["wait_ns"].sum()),
        "mean_queue_ns": _mean(sub["queue_ns"]),
        "mean_duration_ns": _mean(sub["duration_ns"]),
        "created_ns": int(first["created_abs_ns"]),
    }
