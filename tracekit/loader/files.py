"""Opening untrusted paths: regular files only, never a blocking open, every OS error a one-line TracekitError.

A FIFO named ``rank1.json`` would block ``open()`` forever, ``/dev/zero`` would stream until memory runs out, a
socket cannot be read at all: each is refused from ``os.stat`` before opening, and the open itself is
non-blocking (``O_NONBLOCK``) and checked again with ``fstat``, so a file swapped for a FIFO between the two
cannot hang the loader either.
"""

from __future__ import annotations

import os
import re
import stat
from typing import BinaryIO

from ..errors import TraceFormatError, TracekitError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str, error: type[TracekitError] = TraceFormatError, what: str = "trace") -> BinaryIO:
    """``open(path, "rb")`` for regular files only; anything else raises ``error`` in one line."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc}); check the path and permissions") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(
            f"{path}: is {_kind(st.st_mode)}, not a regular file; tracekit reads {what}s from regular files only"
        ) from None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc}); check the path and permissions") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between stat and open
            raise error(f"{path}: is {_kind(st.st_mode)}, not a regular file; tracekit reads {what}s from regular files only")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return _Checked(os.fdopen(fd, "rb"), path, error, what)  # type: ignore[return-value]
    except BaseException:
        os.close(fd)
        raise


class _Checked:
    """A file open for reading whose read errors are one line naming the file and the offset (an EIO from a failing
    disk, a FUSE or network file system, ``/proc/self/mem``): every reader of ``open_regular`` (the stream, the
    split plan, the pass-through, the rule files) raises it, never a bare OSError, which the command line would take
    for a failure to write the standard output (exit 2)."""

    __slots__ = ("_fh", "_path", "_error", "_what")

    def __init__(self, fh: BinaryIO, path: str, error: type[TracekitError], what: str):
        self._fh, self._path, self._error, self._what = fh, path, error, what

    def _fail(self, exc: OSError, at: int):
        return self._error(
            f"{self._path}: read error after {at} bytes ({exc.strerror or exc}); check the disk or re-copy the {self._what}"
        )

    def read(self, size: int = -1) -> bytes:
        at = self._position()
        try:
            return self._fh.read(size)
        except OSError as exc:
            raise self._fail(exc, at) from None

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return self._fh.seek(offset, whence)
        except OSError as exc:
            raise self._fail(exc, self._position()) from None

    def _position(self) -> int:
        try:
            return self._fh.tell()
        except (OSError, ValueError):
            return 0

    def tell(self) -> int:
        return self._fh.tell()

    def fileno(self) -> int:
        return self._fh.fileno()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._fh.close()


def read_limited(path: str, limit: int, error: type[TracekitError], what: str) -> bytes:
    """The whole of a small file (a rule file, a run manifest), refused past ``limit`` bytes."""
    fh = open_regular(path, error, what)
    with fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise error(f"{path}: read error in the {what} ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(f"{path}: the {what} is larger than {limit} bytes; that is not a {what}")
    return data


_NOT_BLANK = re.compile(rb"[^ \t\r\n]")
_BLANK = frozenset(b" \t\r\n")
_QUOTE = ord('"')


class RunGuard:
    """Refuses a long run of bytes without a *stop* byte as the bytes stream past: blanks (a gzip bomb of spaces:
    1 GiB inflates from 1 MB) or bytes without a ``"`` (a multi-GB string; no JSON has megabytes between two
    quotes otherwise) are refused after a few MiB instead of being inflated, buffered and parsed.

    Linear and nearly free: only one byte in every ``block`` is looked at, and from it a C-level search for the
    next stop byte, which in a real trace is a few bytes away. Every run of at least ``2 * block`` bytes holds a
    whole aligned block and is refused; no run shorter than ``block`` ever is.
    """

    def __init__(self, block: int, kind: str):
        self.block, self.kind = max(int(block), 1024), kind
        self.offset = 0  # stream offset of the chunk being looked at
        self.need = 0  # run bytes still needed to complete the block under test (0: none under test)

    def _stop(self, chunk: bytes, start: int, end: int) -> bool:
        if self.kind == "blank":
            return _NOT_BLANK.search(chunk, start, end) is not None
        return chunk.find(b'"', start, end) >= 0

    def _candidate(self, byte: int) -> bool:
        return byte in _BLANK if self.kind == "blank" else byte != _QUOTE

    def feed(self, chunk: bytes) -> bool:
        """True when ``chunk`` completes a whole block without a stop byte."""
        n = len(chunk)
        if self.need:
            end = min(self.need, n)
            if self._stop(chunk, 0, end):
                self.need = 0
            else:
                self.need -= end
                if not self.need:
                    return True
        start = -self.offset % self.block
        self.offset += n
        for g in range(start, n, self.block):
            if self._candidate(chunk[g]):
                end = min(g + self.block, n)
                if not self._stop(chunk, g, end):
                    if end - g == self.block:
                        return True
                    self.need = self.block - (end - g)
        return False
