"""Where tracekit keeps its caches (the Parquet copy of each loaded rank, `analyze`'s analysis entries) unless told:
the user's cache directory, never the trace's own folder (which may be shared, read-only or someone else's).

``--cache-dir DIR`` wins, then ``$TRACEKIT_CACHE_DIR``, then ``$XDG_CACHE_HOME/tracekit`` (an absolute
``XDG_CACHE_HOME`` only, as the XDG base-directory specification says), then ``~/.cache/tracekit``. Entries are
keyed by the trace's resolved path (``os.path.realpath``: a symlink and its target share one), so one directory
holds the caches of every trace a user reads.
"""

from __future__ import annotations

import os


def default_cache_dir() -> str:
    """The cache directory when no ``--cache-dir`` is given."""
    given = os.environ.get("TRACEKIT_CACHE_DIR")
    if given:
        return given
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tracekit")


def resolved(path: str) -> str:
    """The path a cache entry is keyed by."""
    return os.path.realpath(path)
