"""A split piece's columns from the worker to the parent through a file in shared memory, not the result pipe.

Through the pipe, a piece's ~30 MB of columns are pickled, written in 64 KiB turns while the parent's result
thread (which needs the GIL the parent's main thread holds while it absorbs the previous piece) reads them, and
unpickled: the worker sat idle 0.1-0.2 s per piece before it could take the next. Here the worker writes the
arrays into one file under /dev/shm (tmpfs: memory, no disk) and returns its name; the parent maps the file,
unlinks it at once (the mapping lives on until the arrays are let go) and copies the columns into place.

Where there is no writable /dev/shm, or the file cannot be written (a full tmpfs: Docker's default is 64 MB),
``put`` returns None and the arrays go back through the pipe as before. Files of a load that failed half-way
are removed by ``sweep``, named by the parent's pid.
"""

from __future__ import annotations

import contextlib
import glob
import mmap
import os
import secrets
import tempfile
from dataclasses import dataclass

import numpy as np

_SHM = "/dev/shm"
_ALIGN = 64


@dataclass(frozen=True)
class Handoff:
    path: str
    layout: tuple[tuple[str, str, int, tuple[int, ...]], ...]  # (key, dtype, offset, shape) of each array


def tag() -> str:
    """The file-name prefix of the pieces of one load: the loading process's pid (what a benchmark counts) and a
    token of this load (two loads of one process, in threads, never sweep each other's files)."""
    return f"tracekit-piece-{os.getpid()}-{secrets.token_hex(4)}-"


def available() -> bool:
    return os.path.isdir(_SHM) and os.access(_SHM, os.W_OK | os.X_OK)


def put(arrays: dict[str, np.ndarray], prefix: str) -> Handoff | None:
    """Write ``arrays`` into one new shared-memory file; None where that cannot be done (nothing is left)."""
    if not available():
        return None
    try:
        fd, path = tempfile.mkstemp(prefix=prefix, dir=_SHM)
    except OSError:
        return None
    layout, at = [], 0
    try:
        with os.fdopen(fd, "wb") as fh:
            for key, a in arrays.items():
                a = np.ascontiguousarray(a)
                pad = -at % _ALIGN
                if pad:
                    fh.write(b"\0" * pad)
                    at += pad
                if a.nbytes:
                    fh.write(a.data.cast("B"))
                layout.append((key, a.dtype.str, at, a.shape))
                at += a.nbytes
    except OSError:  # ENOSPC on a small tmpfs, say
        _unlink(path)
        return None
    return Handoff(path, tuple(layout))


def take(h: Handoff) -> dict[str, np.ndarray]:
    """The arrays ``put`` wrote, as read-only views of the mapped file, which is unlinked at once."""
    try:
        with open(h.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            buf = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) if size else b""
    finally:
        _unlink(h.path)
    out = {}
    for key, dt, at, shape in h.layout:
        n = int(np.prod(shape))
        flat = np.frombuffer(buf, dtype=np.dtype(dt), count=n, offset=at) if n else np.empty(0, np.dtype(dt))
        out[key] = flat.reshape(shape)
    return out


def sweep(prefix: str) -> None:
    """Remove what a load left behind (a piece decoded but never taken: another piece failed first)."""
    for path in glob.glob(os.path.join(_SHM, glob.escape(prefix) + "*")):
        _unlink(path)


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
