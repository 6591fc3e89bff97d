"""One big trace on every core: the ``traceEvents`` array cut at event boundaries, the pieces decoded in parallel.

The parent reads the header once (the bytes before the array), finds one cut per extra piece with a fast scan (a
regex over a small window of bytes at each target offset: an event's closing ``}``, a comma, the next event's
``{`` and its first key's ``"``), and hands each byte range to a worker (``executors.map_pieces``). A worker
streams its range exactly as the serial reader streams a file (``stream.EventStream`` with a span: the same
limits on blank and quote-less runs, which cannot straddle a cut, because a cut lies between a ``}`` and a
``"``) and returns the numpy columns of its events (``columnar.TableBuilder``); the parent joins them in file
order (``TableBuilder.absorb``) and finishes the table once, as the serial load does.

Only plain JSON is split: a gzip stream cannot be entered in the middle (those load serially, inflated in
chunks). Anything unexpected -- no boundary near a target, a piece that does not decode as whole events (a cut
inside a string), a type surprise, truncation -- raises ``NotStreamable`` and the caller loads the file the
serial way, which knows how to be lenient and to salvage.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import time

from ..errors import InputLimitError
from ..runtime.memory import gc_paused, release_free_memory
from . import handoff
from .classify import RuleSet
from .columnar import TableBuilder
from .decode import StreamLimits
from .executors import map_pieces
from .files import open_regular
from .stream import EventStream, NotStreamable

MIN_SPLIT_BYTES = 64 * 1024**2  # below this a process pool costs more than it saves
MIN_PIECE_BYTES = 32 * 1024**2
MAX_PIECE_BYTES = 128 * 1024**2  # a worker's columns, and their copy on the way back, stay ~50 MB a piece
_WINDOW = 1024**2  # bytes looked at for a boundary near each target offset
_BOUNDARY = re.compile(rb'\}[ \t\r\n]*,[ \t\r\n]*(\{)[ \t\r\n]*"')


def plan(path: str, body_at: int, size: int, pieces: int) -> list[tuple[int, int, bool]]:
    """Byte ranges (start, stop, last) of ``pieces`` pieces of the events array that starts at ``body_at``."""
    fh = open_regular(path)
    cuts = [body_at]
    with fh:
        for k in range(1, pieces):
            target = max(body_at + (size - body_at) * k // pieces, cuts[-1] + 1)
            fh.seek(target)
            window = fh.read(_WINDOW)
            m = _BOUNDARY.search(window)
            if m is None:
                raise NotStreamable(f"no event boundary within {_WINDOW} bytes of byte {target}")
            cuts.append(target + m.start(1))
    bounds = cuts + [size]
    return [(bounds[i], bounds[i + 1], i == len(cuts) - 1) for i in range(len(cuts))]


def decode_piece(
    job: tuple[str, tuple[int, int, bool], StreamLimits, str | None],
) -> tuple[TableBuilder, handoff.Handoff | None, object, float]:
    """A worker: one byte range -> (its builder, the shared-memory file holding the builder's arrays or None when
    they stay in it, the trailing header fields for the last piece, CPU seconds: the piece's cost whatever else
    shares the core, which is what scaling estimates are made of). ``job[3]``: the handoff file prefix, None to
    return the arrays in the builder."""
    path, span, limits, prefix = job
    t = time.process_time()
    stream = EventStream(path, limits, span=span)
    builder = fill(TableBuilder(), stream)
    release_free_memory()  # the worker goes on to the next piece: not with this one's freed structs resident
    sent = None
    if prefix is not None:
        arrays = builder.take_arrays()
        sent = handoff.put(arrays, prefix)
        if sent is None:
            builder.give_arrays(arrays)
        del arrays
    return builder, sent, stream.tail, time.process_time() - t


def fill(builder: TableBuilder, stream: EventStream) -> TableBuilder:
    """Every piece of ``stream`` into ``builder``, each freed once its columns are kept; NotStreamable when the
    timestamps need the exact whole-file pass (ns-resolution epoch times)."""
    for events in stream:
        with gc_paused():
            if not builder.add(events, refuse_inexact=True):
                raise NotStreamable("ns-resolution epoch timestamps need the exact whole-file pass")
        del events
    return builder


def pieces_for(size: int, workers: int) -> int:
    """Twice as many pieces as workers (a slow piece does not hold the others up), and more for a big file so that
    none is over MAX_PIECE_BYTES (memory: see map_pieces), none under MIN_PIECE_BYTES."""
    return max(1, min(max(2 * workers, -(-size // MAX_PIECE_BYTES)), size // MIN_PIECE_BYTES))


def load_split(path: str, limits: StreamLimits, rules: RuleSet, workers: int, stats: dict | None = None):
    """(builder with every piece absorbed, header Trace, header warnings); NotStreamable where the file cannot be
    split (gzip, small, no boundary, anything a piece could not decode). ``stats`` receives the per-piece times."""
    with open_regular(path) as fh:
        gz = fh.read(2) == b"\x1f\x8b"
        size = os.fstat(fh.fileno()).st_size
    if gz or workers < 2 or size < MIN_SPLIT_BYTES or multiprocessing.current_process().daemon:
        raise NotStreamable("not a big plain-JSON trace with cores to spare (or a daemon process: no children)")
    if size > limits.max_bytes:  # the serial reader refuses it as the bytes stream; here before any work
        raise InputLimitError(
            f"{path}: is larger than {limits.max_bytes} bytes (a gzip bomb or a huge trace?); raise "
            "the limit with --max-trace-bytes (or TRACEKIT_MAX_TRACE_BYTES) if it is genuine"
        )
    t0 = time.perf_counter()
    stream = EventStream(path, limits)
    head, body_at = stream.head()
    spans = plan(path, body_at, size, pieces_for(size, workers))
    t1 = time.perf_counter()
    builder = TableBuilder(rules)
    cpu, absorb_s, tail, shared = [], 0.0, None, 0
    prefix = handoff.tag() if handoff.available() else None
    jobs = [(path, span, limits, prefix) for span in spans]
    try:
        with gc_paused():
            for piece, sent, piece_tail, piece_cpu in map_pieces(decode_piece, jobs, workers):
                a = time.perf_counter()
                tail = piece_tail  # the last piece's: the header fields after the events
                if sent is not None:
                    try:
                        piece.give_arrays(handoff.take(sent))
                    except OSError as exc:  # removed under us (a /dev/shm cleaner): the serial load instead
                        raise NotStreamable(f"a piece's columns could not be read back ({exc})") from None
                    shared += 1
                if not builder.rows and piece.rows:  # the pieces are about the same size: room for all, each copied once
                    builder.reserve(int(piece.rows * (size - body_at) / (spans[0][1] - spans[0][0]) * 1.1) + 1024)
                builder.absorb(piece)  # into the builder's columns in place; the piece is let go at once
                del piece
                absorb_s += time.perf_counter() - a
                cpu.append(piece_cpu)
    finally:
        if prefix is not None:
            handoff.sweep(prefix)
    t2 = time.perf_counter()
    assert tail is not None  # the last piece's (plan gives at least one)
    header = stream.merge(head, tail)
    if stats is not None:
        stats.update(
            scan_s=t1 - t0,
            pool_s=t2 - t1 - absorb_s,
            absorb_s=absorb_s,
            piece_cpu_s=cpu,
            piece_bytes=[s[1] - s[0] for s in spans],
            pieces_shared=shared,
        )
    return builder, header, list(stream.warnings)
