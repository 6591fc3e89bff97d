"""An export -> one (EventTable, RankInfo) per GPU-owning process (a rank).

The tables are read once for the whole export and split by process key, vectorised; host rows of processes that
ran no device work (the launcher, the profiler's own threads) are left out. The rank of a process comes from the
launched process's environment when the export holds one GPU process; otherwise it is left for ``ranks`` to
give by process order (-1 here, the order in ``generation["process_order"]``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import TraceFormatError
from ...model.events import EventKind
from ...model.traceset import ProcessGroup, RankInfo
from ..checks import check_table
from ..classify import RuleSet
from . import activities, nccl, nvtx, payloads, processes, schema
from .activities import Rows
from .build import Part, build
from .database import ABSENT, Export


def read(path: str, rules: RuleSet, max_string_bytes: int) -> list[tuple]:
    with Export(path) as db:
        if not schema.is_export(db):
            raise TraceFormatError(
                f"{path}: an SQLite database without any Nsight Systems table (no {schema.KERNEL}, {schema.RUNTIME}, "
                f"{schema.NVTX} or {schema.STRINGS}); not an `nsys export --type sqlite` file"
            )
        warnings = schema.missing_costs(db, path)
        generation = schema.generation(db)
        base = processes.session_start_ns(db)
        device = [r for r in (activities.kernels(db), activities.memcpys(db), activities.memsets(db), activities.syncs(db)) if r]
        host = [r for r in (activities.runtime(db),) if r]
        ranges = nvtx.ranges(db)
        coll = None
        if ranges is not None:
            ids = nvtx.nccl_domain_ids(nvtx.domains(db))
            pay = _join(payloads.decode(db, ids), ranges.cols["row"])
            is_nccl = np.isin(ranges.cols["dom"], np.array(ids, np.int64)) if ids else np.zeros(len(ranges), bool)
            c, sel = ranges.cols, np.flatnonzero(is_nccl)  # only the NCCL calls: a few among the ranges
            coll = nccl.collectives(
                c["ts"][sel],
                c["te"][sel],
                c["tid"][sel],
                ranges.names,
                ranges.name[sel],
                np.ones(len(sel), bool),
                {k: v[sel] for k, v in pay.items()},
            )
            coll["rows"] = sel
            generation["nccl_ranges"] = str(int(is_nccl.sum()))
            generation["nccl_payloads"] = str(int((is_nccl & ((pay["bytes"] >= 0) | (pay["comm"] >= 0))).sum()))
        env = processes.environment(db)
        host_name, gpus, pnames = processes.host_name(db), processes.gpus(db), processes.process_names(db)
    for r in device + host:
        warnings += r.notes
    if not base:
        warnings.append(
            f"{path}: no {schema.SESSION} table: times are relative to the capture's start, so exports of "
            "separate captures share no clock (the cross-rank clock offsets absorb the difference)"
        )
    procs = _gpu_processes(device)
    out = []
    for order, proc in enumerate(procs):
        one = len(procs) == 1  # the only rank takes the rows themselves (build lets them go); several take copies
        parts = [Part(_take(r, proc, one), True) for r in device] + [Part(_take(r, proc, one), False) for r in host]
        if ranges is not None:
            parts.append(Part(_take(ranges, proc, one), False, _coll_of(coll, _mask(ranges, proc)) if coll else None))
        w: list[str] = []
        table = build(parts, rules, base, w)
        w = list(warnings) + [f"{path}: {x}" for x in w]
        info = _info(path, proc, order, len(procs), table, env, generation, (base, host_name, gpus, pnames), w)
        out.append(check_table(table, info, path, max_string_bytes))
    return out


def _coll_of(coll: dict, keep: np.ndarray) -> dict:
    """The NCCL calls of one process: their fields, and their rows among the process's NVTX ranges."""
    mine = keep[coll["rows"]]
    local = (np.cumsum(keep) - 1)[coll["rows"][mine]]
    return {**{k: v[mine] for k, v in coll.items() if k not in ("rows", "nccl")}, "rows": local}


def _join(pay: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """The payload fields per NVTX range (by rowid); -1 where a range has none."""
    out = {k: np.full(len(rows), ABSENT, np.int64) for k in pay if k != "row"}
    if not len(pay["row"]) or not len(rows):
        return out
    order = np.argsort(pay["row"], kind="stable")
    prow = pay["row"][order]
    pos = np.clip(np.searchsorted(prow, rows), 0, len(prow) - 1)
    hit = prow[pos] == rows
    for k in out:
        out[k][hit] = pay[k][order][pos[hit]]
    return out


def _gpu_processes(device: list[Rows]) -> list[int]:
    """The processes that ran device work, in order of the first GPU each used, then of pid; [0] without any
    (an export with host activity only is one rank)."""
    if not device or not sum(len(r) for r in device):
        return [0]
    proc = np.concatenate([r.cols["proc"] for r in device])
    dev = np.concatenate([r.cols["device"] for r in device])
    uniq = np.unique(proc)
    first = [int(dev[proc == p].min()) for p in uniq.tolist()]
    return [int(p) for _, p in sorted(zip(first, uniq.tolist()))]


def _mask(rows: Rows, proc: int) -> np.ndarray:
    p = rows.cols["proc"]
    return (p == proc) | (p == 0) if proc != 0 else np.ones(len(p), bool)


def _take(rows: Rows, proc: int, share: bool) -> Rows:
    keep = _mask(rows, proc)
    if share and keep.all():
        return rows
    return Rows({k: v[keep] for k, v in rows.cols.items()}, rows.name[keep], rows.names, rows.cat[keep], rows.cats)


def _info(path, proc, order, n_procs, table, env, generation, machine, warnings) -> RankInfo:
    base, host_name, gpus, pnames = machine
    pid = int(proc) & ((1 << 24) - 1)
    rank, world, var = processes.rank_from(env.get(0, {})) if n_procs == 1 and len(env) <= 1 else (-1, -1, "")
    used = sorted(set(np.unique(table["device"][table["device"] >= 0]).tolist()))
    names = table.decode("pg_name_id")
    sizes = table["group_size"]
    groups: dict[str, int] = {}
    for i in np.flatnonzero(names != None).tolist():  # noqa: E711 -- the few rows that name a communicator
        groups.setdefault(names[i], max(int(sizes[i]), 0))
    gen = dict(generation)
    gen.update(
        rank=f"env:{var}" if var else "process order",
        process_order=f"{order} of {n_procs}",
        process=f"{pid} {pnames.get(pid, '')}".strip(),
    )
    nccl_used = bool(groups) or bool((table.mask_kind(EventKind.COMM) & (table["device"] >= 0)).any())
    return RankInfo(
        rank=rank,
        world_size=world,
        backend="nccl" if nccl_used else "",
        source=path,
        process_groups=tuple(ProcessGroup(name, "", (), size, "nccl") for name, size in groups.items()),
        device_type="cuda" if used else "cpu",
        device_properties=tuple(gpus[d] for d in used if d in gpus),
        base_time_ns=base,
        host_name=host_name,
        generation=gen,
        warnings=tuple(warnings),
    )


def with_rank(info: RankInfo, rank: int, world: int, note: str | None) -> RankInfo:
    warnings = info.warnings + ((note,) if note else ())
    return replace(info, rank=rank, world_size=world if world > 0 else info.world_size, warnings=warnings)
