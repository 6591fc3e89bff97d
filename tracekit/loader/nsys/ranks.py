"""Ranks across the exports of a run: one export per process (``nsys profile -o rank%q{RANK}``) or one export
holding several GPU processes. A rank comes from the launched process's environment (RANK, OMPI_COMM_WORLD_RANK,
PMI_RANK, SLURM_PROCID, LOCAL_RANK) where an export has it; the others take the numbers no export claimed, in the
order of the files (digits compared as numbers) and, inside a file, of the GPUs their processes ran on -- said
in the warnings, since a wrong guess would pair the wrong peers."""

from __future__ import annotations

import re

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
    return out_files, out


def _natural(path: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path))
