"""Opening the files tracekit writes (``-o``, ``--out``, ``--json``, ``--junit``, ``--timeline-out``, ...): every
failure is one ``ConfigError`` line naming the option's path, what went wrong and the fix, never an OSError
traceback, and never an exit 0 over an output that was not written.

A path that exists and is not a regular file is written in place, never replaced: ``-o /dev/null`` discards,
``--json /dev/stdout`` prints, and a device or FIFO is not swapped for a regular file by a rename (as root, a
temporary-then-rename writer turned ``/dev/full`` into a regular file). A FIFO is opened without blocking, so
one that no process reads is an error, not a hang. A regular file left half-written by a failed write (a full
disk) is removed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError


def _fail(path: str | os.PathLike, why: str, fix: str = "choose a writable file path") -> ConfigError:
    return ConfigError(f"{os.fsdecode(os.fspath(path))!r}: cannot write the output ({why}); {fix}")


def check_output(path: str | os.PathLike, inputs: Iterable[str | os.PathLike] = ()) -> Path:
    """The cheap checks, before any work: a name the OS can hold, not a directory, writable if it exists, not one
    of ``inputs`` (the files the command reads: `analyze run/rank0.json --out run/rank0.json` replaced the trace
    with its summary). A command calls this for each output option first, so a typo fails in a second, not after
    the analysis."""
    text = os.fspath(path)
    if not text:
        raise _fail(path, "an empty name")
    if "\x00" in str(text):
        raise _fail(path, "the name holds a NUL byte")
    p = Path(text)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return p
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise _fail(path, "it is a directory", "give a file name inside it")
    if stat.S_ISREG(st.st_mode) and not os.access(p, os.W_OK):
        raise _fail(path, "the file is read-only", "make it writable or choose another path")
    for source in inputs if stat.S_ISREG(st.st_mode) else ():
        try:
            same = os.path.samefile(p, source)
        except (OSError, ValueError):
            same = False
        if same:
            raise _fail(path, f"it is the input {os.fsdecode(os.fspath(source))!r}", "write the output elsewhere")
    return p


def is_special(path: str | os.PathLike) -> bool:
    """True for an existing path that is not a regular file (a device, a FIFO): written in place, never renamed
    over."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def open_output(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """``open(path, mode)`` for an output (``w`` text in UTF-8, or ``wb``), parent directories created; every
    OSError of the open, the writes inside the block and the close becomes one ConfigError line."""
    p = check_output(path)
    special = is_special(p)
    try:
        if not special:
            p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            p,
            os.O_WRONLY
            | os.O_CREAT
            | os.O_TRUNC
            | getattr(os, "O_CLOEXEC", 0)
            | (getattr(os, "O_NONBLOCK", 0) if special else 0),
            0o666,
        )
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise _fail(path, "a FIFO that no process reads", "start its reader first") from None
        raise _fail(path, exc.strerror or str(exc)) from None
    if special and hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    fh: IO[Any] = os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")
    try:
        with fh:
            yield fh
    except OSError as exc:
        if not special:
            p.unlink(missing_ok=True)
        raise _fail(
            path,
            exc.strerror or str(exc),
            "free space or choose another path" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "choose a writable file path",
        ) from None
    except BaseException:
        if not special:
            p.unlink(missing_ok=True)
        raise


def write_output(path: str | os.PathLike, data: str | bytes) -> Path:
    """``data`` as the whole of the output file ``path``."""
    with open_output(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
    return Path(os.fspath(path))
