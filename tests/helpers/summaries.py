"""Hand-built `tracekit.summary/1` dicts with known answers for the gate tests."""

from __future__ import annotations

import copy

STEP_KEYS = (
    "wall_us",
    "compute_us",
    "comm_us",
    "hidden_comm_us",
    "exposed_comm_us",
    "overlap_ratio",
    "idle_us",
    "memcpy_us",
    "memset_us",
    "multi_stream_comm_us",
)


def step_row(
    step: int,
    wall_us: float = 1000.0,
    comm_us: float = 0.0,
    exposed_comm_us: float | None = None,
    *,
    hidden_comm_us: float | None = None,
    **extra,
) -> dict:
    """One row of a rank's ``steps`` (the gate's and the reporters' tests share it). Give the exposed or the hidden
    part of ``comm_us``, the other is the rest (neither: 0 exposed); every other STEP_KEYS column is 0 unless
    passed in ``extra``."""
    if hidden_comm_us is None:
        exposed_comm_us = 0.0 if exposed_comm_us is None else exposed_comm_us
        hidden_comm_us = comm_us - exposed_comm_us
    elif exposed_comm_us is None:
        exposed_comm_us = comm_us - hidden_comm_us
    else:
        raise ValueError("give exposed_comm_us or hidden_comm_us, not both")
    row = {"step": step, **{k: 0.0 for k in STEP_KEYS}}
    row.update(
        wall_us=wall_us,
        comm_us=comm_us,
        exposed_comm_us=exposed_comm_us,
        hidden_comm_us=hidden_comm_us,
        overlap_ratio=hidden_comm_us / comm_us if comm_us else 0.0,
    )
    row.update(extra)
    return row


def coll(
    rank: int,
    step: int,
    dimension: str,
    op: str,
    dur_us: float,
    exposed_us: float,
    *,
    bytes: int = 4096,
    wait_us: float | None = 0.0,
    transfer_us: float | None = None,
    busbw_gbps: float | None = 1.0,
    pg_name: str = "1",
    seq: int | None = None,
    start_us: float = 0.0,
) -> dict:
    return {
        "rank": rank,
        "step": step,
        "op": op,
        "pg_name": pg_name,
        "pg_desc": f"tracekit:{dimension}",
        "dimension": dimension,
        "seq": seq,
        "stream": 7,
        "name": f"gloo:{op}",
        "start_us": start_us,
        "dur_us": dur_us,
        "bytes": bytes,
        "hidden_us": dur_us - exposed_us,
        "exposed_us": exposed_us,
        "wait_us": wait_us,
        "transfer_us": dur_us - (wait_us or 0.0) if transfer_us is None else transfer_us,
        "algbw_gbps": busbw_gbps,
        "busbw_gbps": busbw_gbps,
    }


def summary(
    steps: dict[int, list[dict]],
    collectives: list[dict] | None = None,
    *,
    world_size: int | None = None,
    layout: dict | None = None,
    workload: str | None = "tp-sp",
    device_type: str = "cpu",
    by_dimension: list[dict] | None = None,
) -> dict:
    ranks = []
    for rank, rows in sorted(steps.items()):
        totals = {k: sum(r[k] for r in rows) for k in STEP_KEYS}
        ranks.append({"rank": rank, "steps": copy.deepcopy(rows), "totals": totals})
    return {
        "schema": "tracekit.summary/1",
        "tracekit_version": "0.1.0",
        "run": {
            "world_size": world_size or len(steps),
            "backend": "gloo",
            "device_type": device_type,
            "layout": {"tp": len(steps)} if layout is None else layout,
            "workload": workload,
            "ranks": sorted(steps),
            "sources": [],
        },
        "ranks": ranks,
        "by_dimension": by_dimension or [],
        "by_process_group": [],
        "collectives": collectives or [],
        "clock_offsets": [],
        "stragglers": [],
        "unrecognised_kernels": [],
        "warnings": [],
    }


def tp_run(
    ag_exposed: list[float],
    rs_exposed: list[float] | None = None,
    *,
    ranks: int = 2,
    comm_each: float = 400.0,
    wall_us: float = 1000.0,
    **kw,
) -> dict:
    """A TP+SP-like run: per step one tp/all_gather and one tp/reduce_scatter on every rank, each lasting
    ``comm_each`` µs, with the given exposed µs per step (the same on every rank)."""
    rs_exposed = rs_exposed if rs_exposed is not None else [0.0] * len(ag_exposed)
    steps, colls = {}, []
    for r in range(ranks):
        rows = []
        for i, (ag, rs) in enumerate(zip(ag_exposed, rs_exposed)):
            rows.append(step_row(i + 1, wall_us=wall_us, comm_us=2 * comm_each, exposed_comm_us=ag + rs))
            colls.append(coll(r, i + 1, "tp", "all_gather", comm_each, ag, seq=2 * i))
            colls.append(coll(r, i + 1, "tp", "reduce_scatter", comm_each, rs, seq=2 * i + 1))
        steps[r] = rows
    return summary(steps, colls, **kw)
