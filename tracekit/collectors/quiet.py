"""Keep the profiler's own chatter out of what a run prints.

Kineto (torch's C++ profiler) writes ``USDT:<date> <time> <pid>:<tid> SyncActivityProfilerHandler.cpp:52]
profiler_start`` (and ``STAGE:...`` lines) straight to file descriptor 2 at every profiler start and stop; no log
level silences them (KINETO_LOG_LEVEL 0-5 all print them, measured with torch 2.13). ``quiet_profiler_chatter()``
puts a pipe under fd 2 for the rest of the process and a thread that copies every line to the real stderr except
those: tracebacks, warnings and every other line still arrive, whole and in order. ``TRACEKIT_VERBOSE=1``
(``tracekit run --verbose``) leaves fd 2 alone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import threading

CHATTER = re.compile(rb"^(?:USDT|STAGE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ [\w.]+\.cpp:\d+\] ")
VERBOSE_ENV = "TRACEKIT_VERBOSE"
_installed: list[tuple[int, int, threading.Thread]] = []


def is_chatter(line: bytes) -> bool:
    return bool(CHATTER.match(line))


def _may_be_chatter(start: bytes) -> bool:
    """Could a line that begins with ``start`` (no newline yet) still turn out to be Kineto's?"""
    return any(start.startswith(p) or p.startswith(start) for p in _PREFIXES)


_PREFIXES = (b"USDT:", b"STAGE:")


def _pump(read_fd: int, out_fd: int) -> None:
    """Copy the pipe to ``out_fd`` line by line, dropping Kineto's lines. A line that cannot be Kineto's is
    copied before its newline arrives (progress bars and prompts stay live)."""
    with os.fdopen(read_fd, "rb", buffering=0) as src:
        buf, mid = b"", False  # mid: the start of the current line was already copied
        while chunk := src.read(65536):
            buf += chunk
            while buf:
                nl = buf.find(b"\n")
                if mid or nl < 0:
                    if nl < 0 and not mid and _may_be_chatter(buf):
                        break  # wait for the rest of the line
                    cut = len(buf) if nl < 0 else nl + 1
                    os.write(out_fd, buf[:cut])
                    buf, mid = buf[cut:], nl < 0
                    continue
                line, buf = buf[: nl + 1], buf[nl + 1 :]
                if not is_chatter(line):
                    os.write(out_fd, line)
        if buf and not is_chatter(buf):
            os.write(out_fd, buf)


def quiet_profiler_chatter() -> bool:
    """Filter Kineto's lines out of this process's fd 2 from now on (once per process); False when verbose or
    when fd 2 cannot be replaced. Never raises: a collector never breaks the run it observes."""
    if _installed or os.environ.get(VERBOSE_ENV, "") not in ("", "0"):
        return False
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 2)
        os.close(write_fd)
    except OSError:
        return False
    t = threading.Thread(target=_pump, args=(read_fd, saved), name="tracekit-stderr-filter", daemon=True)
    t.start()
    _installed.append((saved, read_fd, t))
    atexit.register(restore)
    return True


def restore() -> None:
    """Put the real stderr back under fd 2 and let the filter copy what is left (at exit, or in a test)."""
    while _installed:
        saved, _read_fd, t = _installed.pop()
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the pump sees the end and drains
        t.join(timeout=5)
        os.close(saved)
