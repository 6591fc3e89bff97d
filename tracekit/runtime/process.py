"""The command-line process's own standard streams and its end: closed standard fds, a reader that left the pipe,
a full disk under stdout, and an exit without the interpreter's teardown. Only the console script (tracekit.cli)
calls these; a library user's process is theirs."""

from __future__ import annotations

import errno
import os
import sys

# 128 + SIGPIPE: what a shell reports for a writer killed by a closed pipe (exit 1 would read as "gate failed").
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130  # 128 + SIGINT
# a write to the standard output that failed for one of these is the stream's fault, not a file's
STREAM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF, errno.EFBIG)


def stdout_error(exc: OSError) -> str:
    """The one line for a standard output that cannot be written, with the fix."""
    return (
        f"cannot write the standard output ({exc.strerror}); redirect it to a file with space, or use the command's output option"
    )


def stdout_to_devnull() -> None:
    """CPython's recipe for a broken pipe: point fd 1 at /dev/null, so that the interpreter's last flush of
    sys.stdout at exit neither fails again nor prints 'Exception ignored ... BrokenPipeError'."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):  # no real fd 1 (a test runner's stream): nothing to flush
        pass


def reserve_standard_fds() -> None:
    """A closed stdin/stdout/stderr (``tracekit info X >&-``) is /dev/null here. Python leaves sys.stdout None
    (click then fails on it) and the next file opened would take fd 1, so a stray print would land in it."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            try:
                devnull = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            except OSError:
                continue
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
            if getattr(sys, name) is None:
                setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))  # noqa: SIM115  (lives as sys.std*)


def flush_stdout() -> OSError | None:
    """Flush what sys.stdout still buffers; the error, if the write failed (fd 1 then points at /dev/null)."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except OSError as exc:
        stdout_to_devnull()
        return exc
    return None


def fast_exit(code: int | str | None) -> None:
    """End the process without the interpreter's teardown, which frees every table, frame and module one by one:
    a tenth of a short command after a large analyze (docs/performance.md). Every output is closed by then (each is
    written in a with-block: ``runtime.outputs``) and the standard streams are flushed here; the atexit handlers
    still run. A process that imported torch (``run``, ``demo``, a user's collector) ends the normal way: its
    teardown is torch's to do; so does one under a profiler or a tracer (``python -m cProfile -o``, a debugger),
    which writes its results after the command returns."""
    if "torch" in sys.modules or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # what sys.exit does with a message: it goes to stderr, the status is 1
        print(code, file=sys.stderr)
        status = 1
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)
