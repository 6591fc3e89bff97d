"""Parquet cache of a loaded rank: columns as Arrow arrays, strings and RankInfo in the file's metadata.

Invalidated by the source's size and mtime (taken before the source is read, so a trace that grows during a
load is reloaded next time) and by the schema version. A cache file is never trusted: a hit is validated as a
fresh load is (``validate``: kinds, string ids, times, ranks, header fields); a broken or crafted entry is
ignored with a warning, reloaded from the trace and rewritten, never a traceback."""

from __future__ import annotations

import hashlib
import json
import os

import msgspec
import numpy as np

from ..formats.cache_location import default_cache_dir, resolved
from ..formats.cache_meta import MAX_RANK as _MAX_RANK
from ..formats.cache_meta import decode_meta
from ..formats.core import one_line
from ..model.events import COLUMNS, SCHEMA_VERSION, STRING_COLUMNS, EventKind, EventTable
from ..model.traceset import RankInfo
from .checks import out_of_range_times

_KEY = b"tracekit"
_MAX_META_BYTES = 512 * 1024**2


def cache_path(path: str, cache_dir: str | None, part: str = "") -> str:
    """The entry of ``path``: in ``cache_dir``, else the user's cache directory (formats.cache_location), named by
    the trace's file name and a digest of its resolved path; ``part``: which of the ranks of one source (an Nsight
    export holds one per GPU process), in the name."""
    src = resolved(path)
    digest = hashlib.sha1(src.encode()).hexdigest()[:12]
    base = os.path.basename(src)
    return os.path.join(cache_dir if cache_dir is not None else default_cache_dir(), f"{base}.{digest}{part}.parquet")


def source_stamp(path: str) -> dict | None:
    """What a cache entry is valid for; None when the source cannot be stat'ed (the load will say why)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "schema": SCHEMA_VERSION}


def read_cache(path: str, options, notes: list[str] | None = None, part: str = "") -> tuple[EventTable, RankInfo] | None:
    """The cached (table, info) of ``path``, or None: absent, stale, or invalid (then a line in ``notes``)."""
    target = cache_path(path, options.cache_dir, part)
    if not os.path.isfile(target):
        return None
    why: str | None
    try:
        hit = _read(path, target, options)
    except ValueError as exc:  # the metadata's Struct or a bound refused it: the message names the field
        hit, why = None, f"invalid: {one_line(exc)[:200]}"
    except Exception as exc:  # a cache file is untrusted input: whatever it does, reload from the trace
        hit, why = None, f"unreadable: {type(exc).__name__}"
    else:
        why = validate(*hit) if hit is not None else None
    if why is not None:
        if notes is not None:
            notes.append(f"{path}: ignored the cache entry {target} ({why}) and reloaded the trace")
        return None
    return hit


def _read(path: str, target: str, options) -> tuple[EventTable, RankInfo] | None:
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: the latter imports pyarrow.dataset (~0.2 s, more than the read itself)
    pf = pq.ParquetFile(target)
    raw = (pf.schema_arrow.metadata or {}).get(_KEY, b"")
    if len(raw) > _MAX_META_BYTES:
        raise ValueError("cache metadata too large")
    doc = msgspec.json.decode(raw)
    if not isinstance(doc, dict):
        raise ValueError("cache metadata is not an object")
    if doc.get("stamp") != source_stamp(path) or doc.get("rules") != _rules_key(options):
        return None  # stale: the normal case after the trace changed (any older layout too), no warning
    meta = decode_meta(doc)
    rows, most = pf.metadata.num_rows, _most_rows(path, options)
    if rows > most:  # checked before reading: RLE-encoded columns could inflate to any size
        raise ValueError(f"{rows} rows, more than the trace could hold ({most})")
    table = pf.read(columns=list(COLUMNS))
    cols = {k: table.column(k).to_numpy().astype(d, copy=False) for k, d in COLUMNS.items()}
    return EventTable(cols, tuple(meta.strings)), meta.info.rank_info()


def _most_rows(path: str, options) -> int:
    """More events than this cannot come from ``path``: an event is at least ~40 bytes of JSON, and a .gz trace
    inflates at most ``max_gzip_ratio`` times before the loader refuses it."""
    size = os.path.getsize(path)
    ratio = getattr(options, "max_gzip_ratio", 200) if path.endswith(".gz") else 1
    return int(max(2**20, size * ratio // 40))


def validate(table: EventTable, info: RankInfo) -> str | None:
    """Why a cached rank cannot be what a fresh load produced (None: it can)."""
    n = len(table)
    if any(len(table[k]) != n for k in COLUMNS):
        return "columns of different lengths"
    kind = table["kind"]
    if n and (kind.min() < min(EventKind) or kind.max() > max(EventKind)):
        return "event kinds out of range"
    top = len(table.strings)
    for k in STRING_COLUMNS:
        col = table[k]
        if n and (col.min() < -1 or col.max() >= top):
            return f"{k} outside the string table"
    if out_of_range_times(table).any():
        return "times or durations out of range"
    if n and (table["device"].min() < -1):
        return "device ids out of range"
    r, w = info.rank, info.world_size
    if r < -1 or w < -1 or w == 0 or r > _MAX_RANK or w > _MAX_RANK or (w > 0 and r >= w):
        return f"impossible rank {r} of world size {w}"
    if not 0 <= info.base_time_ns < 2**62:
        return "baseTimeNanoseconds out of range"
    return None


def write_cache(path: str, options, table: EventTable, info: RankInfo, stamp: dict | None = None, part: str = "") -> None:
    """``stamp``: the source's ``source_stamp`` taken before it was read (now, if not given)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    stamp = stamp if stamp is not None else source_stamp(path)
    if stamp is None or stamp != source_stamp(path):
        return  # the trace changed while it was read: caching what was read would serve it as current
    target = cache_path(path, options.cache_dir, part)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        meta = {"stamp": stamp, "rules": _rules_key(options), "strings": list(table.strings), "info": info.to_dict()}
        arrays = {k: pa.array(np.ascontiguousarray(table[k])) for k in COLUMNS}
        pa_table = pa.table(arrays).replace_schema_metadata({_KEY: json.dumps(meta).encode()})
        tmp = f"{target}.{os.getpid()}.tmp"
        pq.write_table(pa_table, tmp, compression="zstd")
        os.replace(tmp, target)
    except (OSError, ValueError, TypeError):  # read-only directory, full disk, an unserialisable field
        return  # loading still works, only slower next time


def _rules_key(options) -> str:
    return hashlib.sha1(repr(options.rules.rules).encode()).hexdigest()[:12]
