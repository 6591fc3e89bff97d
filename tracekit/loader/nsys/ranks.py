"""Ranks across the exports of a run: one export per process (``nsys profile -o rank%q{RANK}``) or one export
holding several GPU processes. A rank comes from the launched process's environment (RANK, OMPI_COMM_WORLD_RANK,
PMI_RANK, SLURM_PROCID, LOCAL_RANK) where an export has it; the others take the numbers no export claimed, in the
order of the files (digits compared as numbers) and, inside a file, of the GPUs their processes ran on -- said
in the warnings, since a wrong guess would pair the wrong peers."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from ...model.columns import Columns
from ...model.events import EventTable
from ...model.traceset import RankInfo
from .reader import with_rank


def assign(files: list[str], results: list[list[tuple]]) -> tuple[list[str], list[tuple]]:
    """(a file per rank, (table, info) per rank) with every rank numbered."""
    flat = [(path, table, info) for path, parts in zip(files, results) for table, info in parts]
    claimed = {info.rank for _, _, info in flat if info.rank >= 0}
    unnamed = [i for i, (_, _, info) in enumerate(flat) if info.rank < 0]
    free = (r for r in range(len(flat) + len(claimed)) if r not in claimed)
    order = sorted(unnamed, key=lambda i: (_natural(flat[i][0]), flat[i][2].generation.get("process_order", "")))
    given: dict[int, int] = {i: next(free) for i in order}
    world = max((info.world_size for _, _, info in flat), default=-1)
    out_files, out = [], []
    for i, (path, table, info) in enumerate(flat):
        if i in given:
            proc = info.generation.get("process", "?")
            note = (
                f"{path}: no rank in the process environment (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, ...); "
                f"process {proc} is rank {given[i]} by process order (file, then GPU)"
            )
            info = with_rank(info, given[i], world if len(flat) > 1 else 1, note if len(flat) > 1 else None)
        out_files.append(path)
        out.append((table, info))
    return out_files, members(out)


def members(results: list[tuple]) -> list[tuple]:
    """Each communicator's member ranks, where every member is loaded (as many ranks name it as its size says):
    written as the group's ``pg_ranks`` text ("[0, 1]"), so that the analysis knows the group (the world group
    is the dimension ``world``); NCCL's payloads name a communicator by its hash only."""
    seen: dict[str, set[int]] = {}
    sizes: dict[str, int] = {}
    for _, info in results:
        for pg in info.process_groups:
            seen.setdefault(pg.name, set()).add(info.rank)
            sizes[pg.name] = max(sizes.get(pg.name, 0), pg.size)
    known = {name: tuple(sorted(r)) for name, r in seen.items() if sizes.get(name, 0) == len(r) > 1}
    if not known:
        return results
    return [_with_members(table, info, known) for table, info in results]


def _with_members(table: EventTable, info: RankInfo, known: dict[str, tuple[int, ...]]) -> tuple:
    mine = {pg.name: known[pg.name] for pg in info.process_groups if pg.name in known}
    if not mine:
        return table, info
    strings = list(table.strings)
    col = np.array(table["pg_ranks_id"], dtype=np.int32)
    for name, ranks in mine.items():
        text = "[" + ", ".join(map(str, ranks)) + "]"
        sid = table.string_id(text)
        if sid < 0:
            sid = len(strings)
            strings.append(text)
        col[table["pg_name_id"] == table.string_id(name)] = sid
    cols = (
        table.columns.replace({"pg_ranks_id": col})
        if isinstance(table.columns, Columns)
        else {**table.columns, "pg_ranks_id": col}
    )
    groups = tuple(replace(pg, ranks=mine.get(pg.name, pg.ranks)) for pg in info.process_groups)
    texts = {"[" + ", ".join(map(str, r)) + "]": r for r in mine.values()}
    return EventTable(cols, tuple(strings)), replace(info, process_groups=groups, group_ranks={**info.group_ranks, **texts})


def _natural(path: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path))
