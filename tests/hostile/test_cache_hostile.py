"""The Parquet cache is never trusted: a crafted or broken entry is ignored with a warning and the trace reloaded
(same table as a fresh load, then a clean entry written); the stamp is taken before the read, so a trace that
grows during a load is not served stale afterwards. Entries are signed with the user's key: the crafted entries
below are re-signed with it (so that the validation behind the signature is what refuses them), and unsigned or
foreign-signed ones are refused by the signature alone."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.hostile import assert_ok, commands, figures, intact_doc, run_inproc, write
from tracekit.loader import loading as io
from tracekit.loader.cache import cache_key, cache_path, write_signed
from tracekit.loader.loading import LoadOptions, load_file


def _entry(path, opts):
    return cache_path(str(path), opts.cache_dir)


def _rewrite(target, columns=None, meta=None, key=None):
    """Rewrite a cache file with some columns and metadata fields replaced (the source's stamp is kept), signed
    with ``key`` (the user's own by default)."""
    table = pq.read_table(target)
    old = json.loads(table.schema.metadata[b"tracekit"])
    cols = {k: table.column(k).to_numpy() for k in table.column_names}
    for k, f in (columns or {}).items():
        cols[k] = f(cols[k].copy())
    new = meta(old) if meta else old
    raw = new if isinstance(new, bytes) else json.dumps(new).encode()
    write_signed(target, pa.table({k: pa.array(v) for k, v in cols.items()}), raw, key or cache_key())


def _set(a, i, v):
    a[i] = v
    return a


def _info(**kw):
    def f(meta):
        meta["info"].update(kw)
        return meta

    return f


CRAFTED = {
    "kind-out-of-range": dict(columns={"kind": lambda a: _set(a, 0, 99)}),
    "negative-kind": dict(columns={"kind": lambda a: _set(a, 0, -7)}),
    "short-string-table": dict(meta=lambda m: dict(m, strings=m["strings"][:1])),
    "string-id-beyond-table": dict(columns={"name_id": lambda a: _set(a, 0, 10**6)}),
    "strings-not-strings": dict(meta=lambda m: dict(m, strings=[1, 2, 3])),
    "time-beyond-2**62": dict(columns={"ts_ns": lambda a: _set(a, 0, 2**63 - 1)}),
    "negative-duration": dict(columns={"dur_ns": lambda a: _set(a, 0, -5)}),
    "impossible-rank": dict(meta=_info(rank=5, world_size=2)),
    "rank-not-an-int": dict(meta=_info(rank="x")),
    "world-size-zero": dict(meta=_info(world_size=0)),
    "base-time-negative": dict(meta=_info(base_time_ns=-1)),
    "process-groups-garbage": dict(meta=_info(process_groups=[{"ranks": ["a"]}])),
    "metadata-not-json": dict(meta=lambda m: b"\xff not json"),
    "metadata-a-list": dict(meta=lambda m: [1, 2]),
}


def _more_rows(target):
    """A cache file claiming 3 M rows for a trace of a few KB (an allocation bomb if read)."""
    table = pq.read_table(target)
    n = 3 * 2**20
    cols = {k: pa.array(np.zeros(n, dtype=table.column(k).type.to_pandas_dtype())) for k in table.column_names}
    write_signed(target, pa.table(cols), table.schema.metadata[b"tracekit"], cache_key())


@pytest.mark.parametrize("name", sorted(CRAFTED) + ["random-bytes", "more-rows-than-the-trace-holds"])
def test_a_crafted_cache_entry_is_reloaded_with_a_warning(tmp_path, name):
    src = write(tmp_path / "rank0.json", intact_doc())
    opts = LoadOptions(cache=True, cache_dir=str(tmp_path / "c"))
    fresh, fresh_info = load_file(str(src), LoadOptions(cache=False))
    load_file(str(src), opts)
    target = _entry(src, opts)
    if name == "random-bytes":
        with open(target, "wb") as fh:
            fh.write(os.urandom(4096))
    elif name == "more-rows-than-the-trace-holds":
        _more_rows(target)
    else:
        _rewrite(target, **CRAFTED[name])
    table, info = load_file(str(src), opts)
    (note,) = [w for w in info.warnings if "ignored the cache entry" in w]
    assert str(src) in note and "reloaded the trace" in note and "\n" not in note
    assert table.strings == fresh.strings and info.rank == fresh_info.rank
    for col in fresh.columns:
        assert (table[col] == fresh[col]).all(), col
    _, again = load_file(str(src), opts)  # the entry was rewritten: a clean hit, no warning
    assert not any("cache" in w for w in again.warnings)


def test_a_crafted_cache_entry_through_the_cli(tmp_path):
    run = tmp_path / "run"
    src = write(run / "rank0.json", intact_doc())
    (tmp_path / "out").mkdir()
    cache = tmp_path / "c"
    args = commands(run, tmp_path / "out")["analyze"]
    args = [a for a in args if a != "--no-cache"] + ["--cache-dir", str(cache)]
    first = run_inproc({"analyze": args}, cache)["analyze"]
    assert_ok({"analyze": first})
    _rewrite(
        cache_path(str(src), str(cache)),
        columns={"kind": lambda a: _set(a, 0, 99)},
        meta=lambda m: dict(m, strings=m["strings"][:2]),
    )
    for entry in cache.glob("analysis.*.json"):  # the whole-analysis entry would serve the summary unloaded
        entry.unlink()
    second = run_inproc({"analyze": args}, cache)["analyze"]
    assert_ok({"analyze": second})
    assert figures(second.stdout) == figures(first.stdout)
    assert any("ignored the cache entry" in w for w in json.loads(second.stdout)["warnings"])


def test_a_trace_that_grows_during_the_load_is_not_served_stale(tmp_path, monkeypatch):
    """The stamp (size, mtime) is taken before the read: what was read is never cached as the grown file."""
    doc = intact_doc()
    src = write(tmp_path / "rank0.json", dict(doc, traceEvents=doc["traceEvents"][:7]))
    grown = json.dumps(doc)
    opts = LoadOptions(cache=True, cache_dir=str(tmp_path / "c"))
    real, reads = io._load_streaming, []

    def read_then_grow(path, options):
        out = real(path, options)
        reads.append(len(out[0]))
        if len(reads) == 1:
            with open(path, "w") as fh:  # the profiler is still writing: the file changes under the loader
                fh.write(grown)
        return out

    monkeypatch.setattr(io, "_load_streaming", read_then_grow)
    first, _ = load_file(str(src), opts)
    second, _ = load_file(str(src), opts)
    assert len(reads) == 2 and len(second) > len(first)  # read again, the grown trace
    third, _ = load_file(str(src), opts)
    assert len(reads) == 2 and len(third) == len(second)  # and now cached, for the file as it is


def _renamed(meta):
    """Every event renamed: a string table of the right shape (same length, strings only) with other names."""
    return dict(meta, strings=[f"renamed_{i}" for i in range(len(meta["strings"]))])


@pytest.mark.parametrize("signed_by", ["this user", "another key", "nobody"])
def test_an_entry_that_renames_every_event_is_served_only_when_this_user_signed_it(tmp_path, signed_by):
    """A string table of the right shape passes every check of shape (ids in range, strings only): only the
    signature tells a crafted one from the table the loader wrote. Re-signed with the user's own key it would be
    served (the key is what the user trusts); signed with another key, or not at all, it is refused."""
    src = write(tmp_path / "rank0.json", intact_doc())
    opts = LoadOptions(cache=True, cache_dir=str(tmp_path / "c"))
    fresh, _ = load_file(str(src), LoadOptions(cache=False))
    load_file(str(src), opts)
    target = _entry(src, opts)
    if signed_by == "nobody":
        table = pq.read_table(target)
        meta = json.dumps(_renamed(json.loads(table.schema.metadata[b"tracekit"]))).encode()
        pq.write_table(table.replace_schema_metadata({b"tracekit": meta}), target)
    else:
        _rewrite(target, meta=_renamed, key=cache_key() if signed_by == "this user" else os.urandom(32))
    table, info = load_file(str(src), opts)
    notes = [w for w in info.warnings if "ignored the cache entry" in w]
    if signed_by == "this user":
        assert not notes and table.strings[0] == "renamed_0"  # the control: the signature is what refuses
        return
    (note,) = notes
    assert "not signed with this user's cache key" in note
    assert table.strings == fresh.strings


def test_a_rewrite_whose_mtime_is_put_back_is_read_afresh(tmp_path):
    """cp -p, rsync -t, tar x: the same size and mtime over different bytes. The ctime moves (os.utime sets it), so
    the entry is stale and the new figures are read (before: the Parquet cache served the old ones)."""
    doc = intact_doc()
    src = write(tmp_path / "run" / "rank0.json", doc)
    (tmp_path / "out").mkdir()
    cache = tmp_path / "c"
    args = [a for a in commands(src.parent, tmp_path / "out")["analyze"] if a != "--no-cache"] + ["--cache-dir", str(cache)]
    first = run_inproc({"analyze": args}, cache)["analyze"]
    before = os.stat(src)
    text = src.read_text()
    # the same length: the GEMM of step 1 takes 300 -> 900 µs (one digit), so its all-reduce is hidden more
    changed = text.replace('"ts": 100.0, "dur": 300,', '"ts": 100.0, "dur": 900,', 1)
    assert changed != text and len(changed) == len(text)
    src.write_text(changed)
    os.utime(src, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(src).st_size, os.stat(src).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    for entry in cache.glob("analysis.*.json"):  # the analysis cache notices the ctime itself; this is the layer below
        entry.unlink()
    second = run_inproc({"analyze": args}, cache)["analyze"]
    fresh = run_inproc({"analyze": [*args, "--no-cache"]}, cache)["analyze"]
    assert figures(second.stdout) == figures(fresh.stdout) != figures(first.stdout)
