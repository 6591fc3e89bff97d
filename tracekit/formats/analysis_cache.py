"""The analysis cache: ``tracekit analyze`` run again on the same traces with the same options reads the summary
it wrote the last time instead of loading and analysing the traces again (the Parquet cache still leaves the
analyzers to run; on a 500 MB trace they are most of a warm run).

An entry is valid only for exactly what the summary depends on, compared in full, never by a hash alone:

- every regular file (name, size, mtime, ctime, inode) of each directory the traces come from, so the traces,
  ``run.json`` and ``activation_r*.json`` are all covered, and a file added, removed, rewritten or ``touch``-ed
  invalidates the entry (ctime cannot be set back by the user, so an edit that restores the mtime still counts);
- the paths given (globs expanded), the options of the analysis and of the loader, and the comm-rule file's bytes;
- every ``TRACEKIT_*`` environment variable (limits, the gzip ratio);
- this tracekit (its version and the size and mtime of every module of the package, so an edited checkout never
  reads a summary its old code wrote), the Python and the versions of numpy, pandas, pyarrow and msgspec.

The stamps are taken before the load, and the entry is written only when they are unchanged after it, so a
trace that changes during a load is analysed again next time. An entry is untrusted input: it is read with the
documents' limits (regular file, size, no NaN) and its summary validated as any summary given to the gate; a
broken one is ignored with a warning in the summary and rewritten. Errors are never cached."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .._version import __version__
from ..errors import SummaryFormatError, TracekitError
from . import core
from .cache_location import default_cache_dir, resolved
from .summary import FAMILY, MAJOR, SummaryDoc

SCHEMA = "tracekit.analysis_cache/1"
_MAX_ENTRY_BYTES = 1024**3
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARIES = ("numpy", "pandas", "pyarrow", "msgspec")


class _Entry(msgspec.Struct, kw_only=True):
    schema: str
    key: dict[str, Any]
    summary: dict[str, Any]


def _file_stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _directory_stamps(directory: str) -> dict[str, Any]:
    """Every visible entry of ``directory`` (the cache directory and other dot files left out): regular files by
    their stamp, anything else (a directory, a FIFO, a dangling link) by what it is, since each can change what
    the loader finds or says."""
    try:
        names = sorted(os.listdir(directory or "."))
    except OSError as exc:
        return {"": exc.errno}
    stamps: dict[str, Any] = {}
    for name in names:
        if name.startswith("."):
            continue
        path = os.path.join(directory, name)
        found: list[Any] | None = _file_stamp(path)
        if found is None:
            try:
                st = os.lstat(path)
                found = [stat.S_IFMT(st.st_mode), st.st_mtime_ns]
            except OSError:
                found = ["gone"]
        stamps[name] = found
    return stamps


_CODE: list[Any] = []


def _code_stamp() -> list[Any]:
    """This tracekit and the libraries whose arithmetic the figures depend on."""
    if not _CODE:
        from importlib import metadata

        modules = []
        for root, dirs, files in os.walk(_PACKAGE):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for name in sorted(files):
                if name.endswith((".py", ".toml", ".html", ".js", ".css", ".j2")):
                    path = os.path.join(root, name)
                    modules.append([os.path.relpath(path, _PACKAGE), _file_stamp(path)])
        versions: dict[str, str | None] = {}
        for lib in _LIBRARIES:
            try:
                versions[lib] = metadata.version(lib)
            except metadata.PackageNotFoundError:
                versions[lib] = None
        _CODE[:] = [__version__, sys.version, versions, hashlib.sha1(core.encode(modules)).hexdigest()]
    return _CODE


def key(paths: Sequence[str], options: Mapping[str, Any], rules_file: str | None) -> dict[str, Any]:
    """What a summary of the traces ``paths`` name (files, directories, globs) analysed with ``options`` depends
    on. Globs are expanded here as the loader expands them, and each match's directory is stamped."""
    import glob

    found = [m for p in paths if any(ch in p for ch in "*?[") for m in sorted(glob.glob(p))]
    every = [*paths, *found]
    dirs = sorted({os.path.abspath(p if os.path.isdir(p) else os.path.dirname(p) or ".") for p in every})
    rules = None
    if rules_file is not None:
        try:  # a regular file only, opened without blocking: a FIFO named rules.toml must not hang the key
            if not stat.S_ISREG(os.stat(rules_file).st_mode):
                raise OSError("not a regular file")
            fd = os.open(rules_file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as fh:
                rules = hashlib.sha1(fh.read(2**20 + 1)).hexdigest()
        except OSError:
            rules = "unreadable"  # the load says why, in one line
    return {
        "paths": [os.path.abspath(p) for p in paths],
        "globbed": [os.path.abspath(p) for p in found],
        "directories": {d: _directory_stamps(d) for d in dirs},
        "options": {k: list(v) if isinstance(v, (tuple, list)) else v for k, v in sorted(options.items())},
        "rules": rules,
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("TRACEKIT_")},
        "code": _code_stamp(),
    }


def entry_path(paths: Sequence[str], options: Mapping[str, Any], cache_dir: str | None) -> str:
    """One entry per traces-and-options: a newer analysis of the same traces replaces the older one. Beside the
    Parquet cache (formats.cache_location: the user's cache directory unless told), keyed by the resolved paths."""
    if cache_dir is None:
        cache_dir = default_cache_dir()
    what = core.encode([[resolved(p) for p in paths], sorted(options.items())])
    return os.path.join(cache_dir, f"analysis.{hashlib.sha1(what).hexdigest()[:16]}.json")


def lookup(path: str, wanted: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(the cached summary, None) on a hit; (None, None) when absent or stale; (None, why) when the entry is
    broken (the caller says so and analyses again)."""
    if not os.path.lexists(path):
        return None, None
    try:
        data = core.read_bytes(path, error=SummaryFormatError, max_bytes=_MAX_ENTRY_BYTES)
        entry = core.decode(data, _Entry, source=path, error=SummaryFormatError, fix="")
    except TracekitError as exc:
        return None, core.one_line(exc).removeprefix(f"{path}: ").removesuffix(";")
    if entry.schema != SCHEMA:
        return None, None  # another tracekit's entry: replaced, no warning
    if entry.key != wanted:
        return None, None
    try:
        doc = msgspec.convert(entry.summary, SummaryDoc)
    except msgspec.ValidationError as exc:
        return None, f"its summary is not a valid summary ({core.one_line(exc)})"
    if not core.schema_accepted(doc.schema, FAMILY, MAJOR):
        return None, f"its summary has schema {doc.schema!r}"
    return entry.summary, None


def store(path: str, wanted: Mapping[str, Any], summary: Mapping[str, Any]) -> str | None:
    """Write the entry atomically; returns why it could not be written (None when written). The summary is kept
    only if it encodes as the JSON it came from would (no NaN: the summary writer never writes one)."""
    import json

    try:
        json.dumps(summary, allow_nan=False)  # msgspec would write NaN as null: the hit would differ from the miss
        data = msgspec.json.encode({"schema": SCHEMA, "key": wanted, "summary": summary})
    except (TypeError, ValueError, OverflowError) as exc:
        return f"not cached: {exc}"
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".analysis.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        return f"could not write the analysis cache {path} ({exc.strerror or exc})"
    return None
