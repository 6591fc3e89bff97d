"""Parquet cache of a loaded rank: columns as Arrow arrays, strings and RankInfo in the file's metadata.

Invalidated by the source's stamp -- size, mtime, ctime, inode and device, taken before the source is read (so a
trace that grows during a load is reloaded next time) -- and by the schema version. The ctime is what a restore
cannot put back: ``cp -p``, ``rsync -t``, ``tar x`` or ``os.utime`` restore a rewritten trace's size and mtime,
never its ctime (the kernel sets it on every change), and a copy is a new inode.

A cache file is never trusted. Each entry is signed: an HMAC-SHA256 of the whole file (the signature's own bytes
written as a placeholder) under a key only this user holds (``cache_key``: 32 random bytes in the user's cache
directory, mode 0600). So an entry that was crafted, edited (a string table that renames every event passes any
check of shape), or copied from another user or machine is refused, and with it the stamp and string table it
carries are bound to the bytes that were written. A signed hit is still validated as a fresh load is
(``validate``: kinds, string ids, times, ranks, header fields). A broken, crafted or foreign entry is ignored
with a warning, reloaded from the trace and rewritten, never a traceback."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat

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
_MAC = b"tracekit.mac"
# what the signature is written over (its length: 64 hex digits); '#' is in no JSON text tracekit writes unescaped
# past this run, nor in the base64 of the Arrow schema, so the last occurrence in the footer is the signature's
_PLACEHOLDER = b"#" * 64
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
    """What a cache entry is valid for; None when the source cannot be stat'ed (the load will say why). The ctime
    and inode beside size and mtime: a rewrite whose mtime was put back still moves the ctime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
        "device": st.st_dev,
        "schema": SCHEMA_VERSION,
    }


def cache_key() -> bytes | None:
    """This user's signing key (created on first use, 32 random bytes, mode 0600): ``TRACEKIT_CACHE_KEY`` or
    ``$XDG_CACHE_HOME/tracekit/cache.key`` (``~/.cache/...``). None when it can be neither read nor created: then
    nothing is cached (an unsigned entry could not be told from a crafted one)."""
    if _KEY_MEMO:
        return _KEY_MEMO[0]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    where = os.environ.get("TRACEKIT_CACHE_KEY") or os.path.join(base, "tracekit", "cache.key")
    key = _read_key(where)
    if key is None:
        try:
            os.makedirs(os.path.dirname(where) or ".", exist_ok=True)
            fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(32))
        except OSError:  # another process made it first (read it below), or no writable home
            pass
        key = _read_key(where)
    _KEY_MEMO.append(key)
    return key


_KEY_MEMO: list[bytes | None] = []


def _read_key(where: str) -> bytes | None:
    try:
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        key = fh.read(64)
    return key if len(key) >= 32 else None


def _signature(key: bytes, data: bytes | bytearray | memoryview) -> bytes:
    return hmac.new(key, data, hashlib.sha256).hexdigest().encode()


def _signed(key: bytes, data: bytes) -> bytes:
    """``data`` (a Parquet file written with ``_PLACEHOLDER`` as its signature) with the signature in its place."""
    at = data.rfind(_PLACEHOLDER)
    if at < 0:
        raise ValueError("no signature placeholder in the written entry")
    return data[:at] + _signature(key, data) + data[at + len(_PLACEHOLDER) :]


def _check_signature(key: bytes, data: bytes, mac: bytes) -> bool:
    """Whether ``mac`` (the entry's stored signature) signs ``data`` under ``key``."""
    if len(mac) != len(_PLACEHOLDER):
        return False
    at = data.rfind(mac)
    if at < 0:
        return False
    return hmac.compare_digest(mac, _signature(key, data[:at] + _PLACEHOLDER + data[at + len(mac) :]))


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
    import pyarrow as pa
    import pyarrow.parquet as pq

    key = cache_key()
    if key is None:
        return None
    data = _entry_bytes(target, _most_bytes(path, options))
    # ParquetFile, not read_table: the latter imports pyarrow.dataset (~0.2 s, more than the read itself)
    pf = pq.ParquetFile(pa.BufferReader(data))
    kv = pf.metadata.metadata or {}  # the footer's own key-values: the signature is written there (the copy in the
    # Arrow schema keeps the placeholder)
    raw = kv.get(_KEY, b"")
    if len(raw) > _MAX_META_BYTES:
        raise ValueError("cache metadata too large")
    doc = msgspec.json.decode(raw)
    if not isinstance(doc, dict):
        raise ValueError("cache metadata is not an object")
    if doc.get("stamp") != source_stamp(path) or doc.get("rules") != _rules_key(options):
        return None  # stale: the normal case after the trace changed (any older layout too), no warning
    if not _check_signature(key, data, kv.get(_MAC, b"")):
        raise ValueError("not signed with this user's cache key: crafted, edited, or written by another user or machine")
    meta = decode_meta(doc)
    rows, most = pf.metadata.num_rows, _most_rows(path, options)
    if rows > most:  # checked before reading: RLE-encoded columns could inflate to any size
        raise ValueError(f"{rows} rows, more than the trace could hold ({most})")
    table = pf.read(columns=list(COLUMNS))
    cols = {k: table.column(k).to_numpy().astype(d, copy=False) for k, d in COLUMNS.items()}
    return EventTable(cols, tuple(meta.strings)), meta.info.rank_info()


def _entry_bytes(target: str, most: int) -> bytes:
    """The whole entry (regular files only, at most ``most`` bytes: the signature is checked over every byte)."""
    from .files import open_regular

    with open_regular(target, what="cache entry") as fh:
        data = fh.read(most + 1)
    if len(data) > most:
        raise ValueError(f"larger than {most} bytes, more than the trace's table could take")
    return data


def _most_bytes(path: str, options) -> int:
    """An entry is its table compressed: never more than a few times the JSON it came from (64 MiB at least)."""
    return max(64 * 1024**2, 4 * _most_rows(path, options) * 40)


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

    stamp = stamp if stamp is not None else source_stamp(path)
    if stamp is None or stamp != source_stamp(path):
        return  # the trace changed while it was read: caching what was read would serve it as current
    key = cache_key()
    if key is None:
        return  # no key to sign with: an unsigned entry would never be read
    target = cache_path(path, options.cache_dir, part)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        meta = {"stamp": stamp, "rules": _rules_key(options), "strings": list(table.strings), "info": info.to_dict()}
        arrays = {k: pa.array(np.ascontiguousarray(table[k])) for k in COLUMNS}
        write_signed(target, pa.table(arrays), json.dumps(meta).encode(), key)
    except (OSError, ValueError, TypeError):  # read-only directory, full disk, an unserialisable field
        return  # loading still works, only slower next time


def write_signed(target: str, pa_table, meta: bytes, key: bytes) -> None:
    """``pa_table`` with ``meta`` as its metadata, signed with ``key``, written to ``target`` (whole or not at all)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(pa_table.replace_schema_metadata({_KEY: meta, _MAC: _PLACEHOLDER}), sink, compression="zstd")
    data = _signed(key, sink.getvalue().to_pybytes())
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, target)


def _rules_key(options) -> str:
    return hashlib.sha1(repr(options.rules.rules).encode()).hexdigest()[:12]
