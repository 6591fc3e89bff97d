"""The CUPTI activity tables of an export as rows: kernels, copies, fills, synchronisations and CUDA API calls.

Each table is one SQL query whose columns arrive as numpy arrays; names are the StringIds the rows use, fetched
by a join (``strings.lookup``); copies, fills and syncs are named from their CUPTI enums as Kineto names them
(``Memcpy HtoD (Pageable -> Device)``, ``Stream Sync``), so that every rule reads the same words on both formats.
Rows carry the process key (``globalPid``/``globalTid`` >> 24: the process, with the host's id above it) so
that an export holding several processes can be split into ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .database import ABSENT, Export, int_of
from .schema import (
    BACKTRACE_CLASSES,
    DRIVER_CLASS,
    INVALID_STREAM,
    KERNEL,
    MEMCPY,
    MEMCPY_KINDS,
    MEMORY_KINDS,
    MEMSET,
    RUNTIME,
    SYNC,
    SYNC_TYPES,
)
from .strings import lookup, normalised_value

PID_SHIFT = 24  # Serialized GlobalId: ... | pid << 24 | tid (NVIDIA's export docs, "Serialized process and thread ids")
_LOW24 = (1 << 24) - 1


@dataclass
class Rows:
    """One kind of rows: int64 columns, names as codes into ``names``, categories as codes into ``cats``."""

    cols: dict[str, np.ndarray]
    name: np.ndarray
    names: list[str]
    cat: np.ndarray
    cats: list[str]
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.name)


def _select(db: Export, table: str, wanted: dict[str, str], where: str = "") -> dict[str, np.ndarray]:
    """``wanted``: output name -> column; a column the table lacks reads as absent everywhere."""
    have = db.columns(table)
    safe = [f"{int_of(col) if col in have else 'NULL'} AS {out}" for out, col in wanted.items()]
    plain = [f'"{col}" AS {out}' if col in have else f"NULL AS {out}" for out, col in wanted.items()]
    return db.ints(
        f'SELECT {", ".join(safe)} FROM "{table}" {where}', wanted, f'SELECT {", ".join(plain)} FROM "{table}" {where}'
    )


def _device_rows(db: Export, table: str, extra: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    c = _select(
        db,
        table,
        {"ts": "start", "te": "end", "device": "deviceId", "stream": "streamId", "corr": "correlationId", "gpid": "globalPid"}
        | (extra or {}),
    )
    c["proc"] = _proc(c)
    return c


def _proc(c: dict[str, np.ndarray]) -> np.ndarray:
    g = c.pop("gpid")
    return np.where(g >= 0, g >> PID_SHIFT, 0)


def kernels(db: Export) -> Rows | None:
    if not db.has(KERNEL):
        return None
    have = db.columns(KERNEL)
    name_col = next((c for c in ("demangledName", "shortName") if c in have), None)
    c = _device_rows(db, KERNEL, {"name_id": name_col} if name_col else {})
    ids = c.pop("name_id", np.full(len(c["ts"]), ABSENT, np.int64))
    name, names = lookup(db, f'SELECT "{name_col}" FROM "{KERNEL}"', ids) if name_col else (ids, [])
    return Rows(c, name, names, np.zeros(len(name), np.int64), ["kernel"])


def memcpys(db: Export) -> Rows | None:
    if not db.has(MEMCPY):
        return None
    c = _device_rows(db, MEMCPY, {"bytes": "bytes", "copy": "copyKind", "src": "srcKind", "dst": "dstKind"})
    code = (
        _bounded(c.pop("copy"), MEMCPY_KINDS) * 100
        + _bounded(c.pop("src"), MEMORY_KINDS) * 10
        + _bounded(c.pop("dst"), MEMORY_KINDS)
    )
    uniq, name = np.unique(code, return_inverse=True)
    names = [f"Memcpy {MEMCPY_KINDS[u // 100]} ({MEMORY_KINDS[u // 10 % 10]} -> {MEMORY_KINDS[u % 10]})" for u in uniq.tolist()]
    return Rows(c, name.astype(np.int64), names, np.zeros(len(name), np.int64), ["gpu_memcpy"])


def memsets(db: Export) -> Rows | None:
    if not db.has(MEMSET):
        return None
    c = _device_rows(db, MEMSET, {"bytes": "bytes", "mem": "memKind"})
    uniq, name = np.unique(_bounded(c.pop("mem"), MEMORY_KINDS, default=3), return_inverse=True)
    names = [f"Memset ({MEMORY_KINDS[u]})" for u in uniq.tolist()]
    return Rows(c, name.astype(np.int64), names, np.zeros(len(name), np.int64), ["gpu_memset"])


def syncs(db: Export) -> Rows | None:
    if not db.has(SYNC):
        return None
    c = _device_rows(db, SYNC, {"sync": "syncType"})
    c["stream"] = np.where((c["stream"] == INVALID_STREAM) | (c["stream"] < 0), ABSENT, c["stream"])
    uniq, name = np.unique(_bounded(c.pop("sync"), SYNC_TYPES), return_inverse=True)
    return Rows(c, name.astype(np.int64), [SYNC_TYPES[u] for u in uniq.tolist()], np.zeros(len(name), np.int64), ["cuda_sync"])


def runtime(db: Export) -> Rows | None:
    """CUDA runtime and driver calls; the backtrace rows of 2022.x (the same call again) are left out in SQL, and
    what still shares a correlation id is dropped here (counted in the notes)."""
    if not db.has(RUNTIME):
        return None
    have = db.columns(RUNTIME)
    where = f"WHERE eventClass NOT IN {BACKTRACE_CLASSES}" if "eventClass" in have else ""
    c = _select(
        db,
        RUNTIME,
        {"ts": "start", "te": "end", "corr": "correlationId", "gtid": "globalTid", "cls": "eventClass", "name_id": "nameId"},
        where,
    )
    g = c.pop("gtid")
    c["proc"] = np.where(g >= 0, g >> PID_SHIFT, 0)
    c["tid"] = np.where(g >= 0, g & _LOW24, ABSENT)
    ids = c.pop("name_id")
    name, names = lookup(db, f'SELECT nameId FROM "{RUNTIME}" {where}', ids, normalised_value("runtime"))
    cat = np.where(c.pop("cls") == DRIVER_CLASS, 1, 0).astype(np.int64)
    rows = Rows(c, name, names, cat, ["cuda_runtime", "cuda_driver"])
    return _drop_repeated_calls(rows, db.path)


def _drop_repeated_calls(rows: Rows, path: str) -> Rows:
    """A call listed twice under one correlation id (the same launch twice): the first, shortest one stays."""
    corr = rows.cols["corr"]
    has = np.flatnonzero(corr > 0)
    if len(has) < 2:
        return rows
    dur = rows.cols["te"][has] - rows.cols["ts"][has]
    order = has[np.lexsort((dur, corr[has]))]
    dup = np.zeros(len(corr), bool)
    dup[order[1:][corr[order[1:]] == corr[order[:-1]]]] = True
    if not dup.any():
        return rows
    keep = ~dup
    rows.notes.append(
        f"{path}: {int(dup.sum())} CUDA API rows repeat the correlation id of another call; the shortest of each "
        "is kept (one launch, one runtime row)"
    )
    return Rows({k: v[keep] for k, v in rows.cols.items()}, rows.name[keep], rows.names, rows.cat[keep], rows.cats, rows.notes)


def _bounded(values: np.ndarray, table: tuple, default: int = 0) -> np.ndarray:
    """Enum numbers as indices into ``table``; out of range -> ``default`` (Unknown)."""
    return np.where((values >= 0) & (values < len(table)), values, default)


def device_pid_of(proc: np.ndarray) -> np.ndarray:
    """The OS process id inside a process key."""
    return proc & _LOW24
