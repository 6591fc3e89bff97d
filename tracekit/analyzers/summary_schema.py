"""Builds the ``tracekit.summary/1`` dict (docs/summary-schema.md) from the analyzers' results: the JSON
contract that ``Analysis.to_dict()`` returns and the gate and the reports read."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

from ..formats.contract import SUMMARY_SCHEMA as SCHEMA
from ..model.traceset import TraceSet
from .names import distinct_short_names

# Per-instance rows kept in the summary: the most exposed this many (a 5 M-event trace has 1.7 M instances, a
# 770 MB summary); the rest are counted in `collectives_limit` and written in full by `--collectives-out`.
DEFAULT_MAX_COLLECTIVE_ROWS = 20_000


def max_collective_rows() -> int:
    """The limit: TRACEKIT_MAX_COLLECTIVE_ROWS when it is a positive integer, else the default."""
    text = os.environ.get("TRACEKIT_MAX_COLLECTIVE_ROWS", "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_COLLECTIVE_ROWS


def _num(x) -> float | None:
    """A float for JSON; None (null) for NaN."""
    x = float(x)
    return None if math.isnan(x) else x


def _int(x) -> int | None:
    """An int for JSON; None (null) for a missing value (NaN, pandas' NA)."""
    return None if pd.isna(x) else int(x)


def _us(x) -> float | None:
    v = _num(x)
    return None if v is None else v / 1e3


def build_summary(traces: TraceSet, comm) -> dict:
    from .._version import __version__

    infos = [traces.info(r) for r in traces.ranks]
    md = traces.metadata
    run = {
        "world_size": md.world_size,
        "backend": md.backend or (infos[0].backend if infos else ""),
        "device_type": _device_type(comm, infos),
        "layout": dict(md.layout),
        "workload": md.manifest.get("workload") or None,
        "ranks": traces.ranks,
        "sources": [i.source for i in infos],
        "manifest": dict(md.manifest),
    }
    out = {"schema": SCHEMA, "tracekit_version": __version__, "run": run}
    sections = comm_sections(comm)
    for r, rank in zip(sections["ranks"], traces.ranks):  # a cut file the loader salvaged (its steps are marked)
        r["truncated"] = traces.info(rank).truncated
    out.update(sections)
    # the run's warnings hold the ranks' already (the loader copies them): each is listed once
    out["warnings"] = list(dict.fromkeys([*md.warnings, *(w for i in infos for w in i.warnings), *comm.warnings]))
    bound = sections["collectives_limit"]
    if bound["omitted"]:
        out["warnings"] = [
            *out["warnings"],
            (
                f"the summary keeps the {bound['limit']} most exposed of {bound['total']} collective instances "
                "(`collectives_limit`); write every instance with `tracekit analyze --collectives-out FILE.parquet`, or "
                "raise TRACEKIT_MAX_COLLECTIVE_ROWS"
            ),
        ]
    return out


def _device_type(comm, infos) -> str:
    """The run's device type as the analysis took it (a GPU trace whose device events were all lost at a
    truncation is still a GPU run, not a CPU-only one)."""
    if comm.ranks:
        return comm.ranks[0].device_type
    return infos[0].device_type if infos else "cpu"


def comm_sections(comm, limit: int | None = None) -> dict:
    """``limit``: per-instance rows kept in ``collectives`` (default ``max_collective_rows()``)."""
    df = instances_frame(comm, _SUMMARY_COLUMNS)
    limit = max_collective_rows() if limit is None else limit
    complete = complete_rows(comm, df)  # aggregates, like the totals, cover the complete steps only
    # the rows of complete steps, in the columns the aggregates read (not a second copy of every column: at
    # 1.25 M instances the frame and its copy were 0.5 GB at the summary's peak); all rows: the frame itself
    whole = df if complete.all() else df.loc[complete, list(_AGG_COLUMNS)]
    wait = whole.groupby("rank")["wait_ns"].sum(min_count=1)
    ranks = []
    for r in comm.ranks:
        d = r.to_dict()
        d["wait_us"] = _us(wait.get(r.rank, math.nan)) if comm.multi_rank else None
        ranks.append(d)
    return {
        "ranks": ranks,
        "by_dimension": _by_dimension(whole),
        "by_process_group": _by_group(whole),
        "collectives": _collectives(_most_exposed(df, limit), comm.multi_rank),
        "collectives_limit": {"limit": limit, "total": len(df), "omitted": max(len(df) - limit, 0)},
        "clock_offsets": [o.to_dict() for o in comm.cross.offsets],
        "stragglers": [s.to_dict() for s in comm.cross.stragglers],
        "unrecognised_kernels": [k.to_dict() for k in comm.unrecognised],
    }


def complete_rows(comm, df: pd.DataFrame):
    """Which instances belong to a complete step of their rank."""
    if df.empty:
        return np.zeros(0, bool)
    # (rank, step) as one int64 (rank < 2^31, step an int32): one vectorised look-up instead of a tuple per row
    keys = np.array(
        [(int(r.rank) << 32) | (int(s.step) & 0xFFFFFFFF) for r in comm.ranks for s in r.steps if s.complete], dtype=np.int64
    )
    codes = (df["rank"].to_numpy(np.int64) << 32) | (df["step"].to_numpy(np.int64) & 0xFFFFFFFF)
    return np.isin(codes, keys)


# what the summary's sections read of the instances (the aggregates, the most exposed rows, the row columns)
_AGG_COLUMNS = (
    "rank",
    "dimension",
    "op",
    "pg_name",
    "pg_desc",
    "pg_ranks",
    "pg_members",
    "bytes",
    "dur_ns",
    "hidden_ns",
    "exposed_ns",
    "wait_ns",
    "transfer_ns",
    "bus_bytes",
    "bw_ns",
)
_SUMMARY_COLUMNS = (
    "rank",
    "step",
    "op",
    "pg_name",
    "pg_desc",
    "pg_ranks",
    "pg_members",
    "dimension",
    "seq",
    "stream",
    "name",
    "start_ns",
    "end_ns",
    "bytes",
    "hidden_ns",
    "wait_ns",
    "transfer_ns",
    "skew_ns",
    "algbw_gbps",
    "busbw_gbps",
)


def instances_frame(comm, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Every instance with its derived durations; ``columns``: only these of the instances' own columns (those
    the derived ones need are always there)."""
    cols = comm.instances.columns
    df = pd.DataFrame({k: v for k, v in cols.items() if columns is None or k in columns})
    if "bytes" in df:
        df["bytes"] = df["bytes"].where(df["bytes"] >= 0).astype("Int64")  # unknown size (-1): null, never 0 B
    df["dur_ns"] = df["end_ns"] - df["start_ns"]
    df["exposed_ns"] = df["dur_ns"] - df["hidden_ns"]
    factor = df["busbw_gbps"] / df["algbw_gbps"]
    df["bus_bytes"] = (df["bytes"] * factor).where(df["transfer_ns"] > 0)
    df["bw_ns"] = df["transfer_ns"].where(df["bus_bytes"].notna())
    return df


def _agg(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    g = df.groupby(by, sort=True, dropna=False)
    return pd.DataFrame(
        {
            "count": g.size(),
            "bytes": g["bytes"].sum().where(g["bytes"].count() == g.size()),  # null when any size is unknown
            "comm_ns": g["dur_ns"].sum(),
            "hidden_ns": g["hidden_ns"].sum(),
            "exposed_ns": g["exposed_ns"].sum(),
            "wait_ns": g["wait_ns"].sum(min_count=1),
            "transfer_ns": g["transfer_ns"].sum(min_count=1),
            "bus_bytes": g["bus_bytes"].sum(min_count=1),
            "bw_ns": g["bw_ns"].sum(min_count=1),
        }
    ).reset_index()


def _by_dimension(df: pd.DataFrame) -> list[dict]:
    if df.empty:
        return []
    out = []
    for row in _agg(df, ["dimension", "op"]).itertuples(index=False):
        out.append(
            {
                "dimension": row.dimension,
                "op": row.op or "unknown",
                "count": int(row.count),
                "bytes": _int(row.bytes),
                "comm_us": row.comm_ns / 1e3,
                "hidden_comm_us": row.hidden_ns / 1e3,
                "exposed_comm_us": row.exposed_ns / 1e3,
                "wait_us": _us(row.wait_ns),
                "transfer_us": _us(row.transfer_ns),
                "busbw_gbps": _num(row.bus_bytes / row.bw_ns) if row.bw_ns == row.bw_ns and row.bw_ns > 0 else None,
            }
        )
    return out


def _by_group(df: pd.DataFrame) -> list[dict]:
    if df.empty:
        return []
    out = []
    members = dict(zip(df["pg_ranks"], df["pg_members"]))  # the loader's parse of each group's ranks text
    for row in _agg(df, ["pg_name", "pg_desc", "dimension", "pg_ranks"]).itertuples(index=False):
        ranks = list(members.get(row.pg_ranks, ()))
        out.append(
            {
                "pg_name": row.pg_name,
                "pg_desc": row.pg_desc,
                "dimension": row.dimension,
                "ranks": ranks,
                "count": int(row.count),
                "bytes": _int(row.bytes),
                "comm_us": row.comm_ns / 1e3,
                "hidden_comm_us": row.hidden_ns / 1e3,
                "exposed_comm_us": row.exposed_ns / 1e3,
                "wait_us": _us(row.wait_ns),
                "transfer_us": _us(row.transfer_ns),
            }
        )
    return out


def _most_exposed(df: pd.DataFrame, limit: int) -> pd.DataFrame:
    """The ``limit`` instances with the most exposed time (ties: in rank, start order), or all of them."""
    if len(df) <= limit:
        return df
    order = np.lexsort((df["start_ns"].to_numpy(), df["rank"].to_numpy(), -df["exposed_ns"].to_numpy()))
    return df.iloc[np.sort(order[:limit])]


def collectives_frame(comm) -> pd.DataFrame:
    """Every collective instance, the columns of the summary's ``collectives`` rows, in rank and start order: the
    full table ``--collectives-out`` writes (the summary keeps the most exposed only)."""
    return _collective_columns(instances_frame(comm), comm.multi_rank)


def _collective_columns(df: pd.DataFrame, multi: bool) -> pd.DataFrame:
    """The one definition of a collective row, column by column, for the summary's ``collectives`` and the
    ``--collectives-out`` table alike: µs from ns, "unknown" for an op without a name, and NaN where a figure has
    no value (wait, transfer and skew need the other ranks: NaN on a single rank), which is null in both."""
    df = df.sort_values(["rank", "start_ns"], kind="stable")

    def us(col: str, gated: bool = False) -> pd.Series:
        return df[col] / 1e3 if multi or not gated else pd.Series(np.nan, index=df.index)

    out = pd.DataFrame(
        {
            "rank": df["rank"].astype("int64"),
            "step": df["step"].astype("int64"),
            "op": df["op"].fillna("").replace("", "unknown"),
            "pg_name": df["pg_name"],
            "pg_desc": df["pg_desc"],
            "dimension": df["dimension"],
            "seq": df["seq"].astype("int64"),
            "stream": df["stream"].astype("int64"),
            "name": df["name"],
            "short_name": _labels(df["name"].fillna("")),
            "start_us": us("start_ns"),
            "dur_us": us("dur_ns"),
            "bytes": df["bytes"].astype("Int64"),  # null where the size is unknown
            "hidden_us": us("hidden_ns"),
            "exposed_us": us("exposed_ns"),
            "wait_us": us("wait_ns", True),
            "transfer_us": us("transfer_ns", True),
            "skew_us": us("skew_ns", True),
            "algbw_gbps": df["algbw_gbps"].astype("float64"),
            "busbw_gbps": df["busbw_gbps"].astype("float64"),
        }
    )
    return out.reset_index(drop=True)


def _labels(names: pd.Series) -> pd.Series:
    """Each row's short name, two different kernels never sharing one (names.distinct_short_names)."""
    codes, uniq = pd.factorize(names)
    return pd.Series(np.array(distinct_short_names([str(u) for u in uniq]), dtype=object)[codes], index=names.index)


def _collectives(df: pd.DataFrame, multi: bool) -> list[dict]:
    """The summary's rows: the columns of :func:`_collective_columns`, NaN written as null."""
    frame = _collective_columns(df, multi)
    if frame.empty:
        return []
    frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_dict("records")
