"""Nsight Systems exports (``nsys export --type sqlite``; ``.nsys-rep`` reports through the ``nsys`` CLI) -> the
same per-rank EventTables and RankInfos the Kineto loader gives, so every analysis runs on them unchanged.

Only this sub-package knows the export's schema: ``database`` (read-only SQLite through Arrow), ``schema`` (the
tables as data), ``strings``, ``activities`` (CUPTI tables), ``nvtx``, ``payloads`` and ``nccl`` (NCCL's API
ranges), ``steps``, ``processes``, ``build`` (one process -> EventTable), ``reader`` (an export -> its ranks),
``ranks`` (ranks across the exports of a run) and ``report`` (``.nsys-rep`` conversion). docs/analyze.md says what
maps to what and what an export lacks compared to a Kineto trace.
"""

from __future__ import annotations

import glob
import os
from dataclasses import replace

SUFFIXES = (".sqlite", ".nsys-rep")
_READER = "nsys1"  # in the cache's part names: a change of how exports are read invalidates their entries


def is_export(path: str) -> bool:
    return os.fspath(path).endswith(SUFFIXES)


def load_export(path: str, options) -> list[tuple]:
    """Every rank of one export as (EventTable, RankInfo); a module-level function, so that the loader's
    executors can run it in a worker. The Parquet cache holds one entry per rank (``_part``)."""
    from ..cache import source_stamp, write_cache
    from ..checks import check_strings
    from .reader import read
    from .report import exported

    source = exported(path, options.cache_dir) if path.endswith(".nsys-rep") else path
    notes: list[str] = []
    stamp = source_stamp(source) if options.cache else None
    if options.cache:
        hit = _cached(source, options, notes)
        if hit is not None:
            for table, _ in hit:
                check_strings(table, source, options.max_string_bytes)
            return hit
    results = read(source, options.rules, options.max_string_bytes)
    if stamp is not None:
        for i, (table, info) in enumerate(results):
            write_cache(source, options, table, info, stamp, part=_part(i, len(results)))
    if notes:  # about this load only (a rejected cache entry): not written to the cache
        table, info = results[0]
        results[0] = (table, replace(info, warnings=tuple(notes) + tuple(info.warnings)))
    return results


def _part(i: int, n: int) -> str:
    return f".{_READER}.{i}of{n}"


def _cached(source: str, options, notes: list[str]) -> list[tuple] | None:
    """Every rank of a cached export, or None when one is missing, stale or invalid (then the export is read)."""
    from ..cache import cache_path, read_cache

    prefix = cache_path(source, options.cache_dir, f".{_READER}.0of")[: -len(".parquet")]
    found = glob.glob(glob.escape(prefix) + "*.parquet")
    n = found[0][len(prefix) : -len(".parquet")] if len(found) == 1 else ""
    if not n.isdigit() or not 0 < int(n) < 100_000:
        return None
    out = []
    for i in range(int(n)):
        hit = read_cache(source, options, notes, part=_part(i, int(n)))
        if hit is None:
            return None
        out.append(hit)
    return out
