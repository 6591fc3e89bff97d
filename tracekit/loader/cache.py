"""Parquet cache of a loaded rank: columns as Arrow arrays, strings and RankInfo in the file's metadata.

Invalidated by the source's size and mtime and by the schema version; a broken or stale cache is ignored
and rewritten, never trusted."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from ..model.events import COLUMNS, SCHEMA_VERSION, EventTable
from ..model.traceset import RankInfo

_KEY = b"tracekit"


def cache_path(path: str, cache_dir: str | None) -> str:
    src = os.path.abspath(path)
    digest = hashlib.sha1(src.encode()).hexdigest()[:12]
    base = os.path.basename(src)
    if cache_dir is None:
        cache_dir = os.environ.get("TRACEKIT_CACHE_DIR") or os.path.join(os.path.dirname(src), ".tracekit_cache")
    return os.path.join(cache_dir, f"{base}.{digest}.parquet")


def _stamp(path: str) -> dict:
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "schema": SCHEMA_VERSION}


def read_cache(path: str, options) -> tuple[EventTable, RankInfo] | None:
    import pyarrow.parquet as pq

    target = cache_path(path, options.cache_dir)
    try:
        if not os.path.exists(target):
            return None
        # ParquetFile, not read_table: the latter imports pyarrow.dataset (~0.2 s, more than the read itself)
        pf = pq.ParquetFile(target)
        meta = json.loads(pf.schema_arrow.metadata[_KEY])
        if meta.get("stamp") != _stamp(path) or meta.get("rules") != _rules_key(options):
            return None
        table = pf.read(columns=list(COLUMNS))
        cols = {k: table.column(k).to_numpy().astype(d, copy=False) for k, d in COLUMNS.items()}
        return EventTable(cols, tuple(meta["strings"])), RankInfo.from_dict(meta["info"])
    except Exception:
        return None


def write_cache(path: str, options, table: EventTable, info: RankInfo) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = cache_path(path, options.cache_dir)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        meta = {"stamp": _stamp(path), "rules": _rules_key(options), "strings": list(table.strings),
                "info": info.to_dict()}
        arrays = {k: pa.array(np.ascontiguousarray(table[k])) for k in COLUMNS}
        pa_table = pa.table(arrays).replace_schema_metadata({_KEY: json.dumps(meta).encode()})
        tmp = f"{target}.{os.getpid()}.tmp"
        pq.write_table(pa_table, tmp, compression="zstd")
        os.replace(tmp, target)
    except OSError:
        return  # read-only trace directory or full disk: loading still works, only slower next time


def _rules_key(options) -> str:
    return hashlib.sha1(repr(options.rules.rules).encode()).hexdigest()[:12]
