"""The process's memory, which the loader and the analyzers share: the cyclic collector paused while millions of
acyclic objects are made, and the C heap's free pages handed back after a load."""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Allocation-heavy decoding runs several times faster without the cyclic collector."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere). A load frees
    millions of small objects and per-piece arrays: without it that memory stays resident in the heap's holes
    (~100 MB per million events) while the analyzers' big arrays are mapped anew beside it."""
    if not _TRIM:
        try:
            _TRIM.append(ctypes.CDLL(None).malloc_trim)
        except (OSError, AttributeError):
            _TRIM.append(None)
    if _TRIM[0] is not None:
        _TRIM[0](0)


_TRIM: list = []  # glibc's malloc_trim once looked up (None where the C library has none)
