"""Checks on a loaded rank that turn bad input into a one-line error or warning naming the file.

Run by ``tracekit.loader.loading.load_file`` on the decoded trace (``check_header``) and on the built table
(``check_table``); cheap next to decoding: numpy passes over the columns and a loop over the unique strings.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..errors import InputLimitError, MissingRankError, TraceFormatError
from ..model.dropped import UNKNOWN_NS
from ..model.events import COLUMNS, EventKind, EventTable
from ..model.traceset import RankInfo
from ..runtime.env import env_limit
from .kinds import DEVICE_CATS, HOST_CATS

# Longest single string (event name, category, group name) accepted: a multi-GB name would be copied into every
# report; refused instead. Real kernel names with C++ templates are a few KB.
DEFAULT_MAX_STRING_BYTES = int(env_limit("TRACEKIT_MAX_STRING_BYTES", 1024**2))
# Categories Kineto writes that tracekit knows (classified, or deliberately dropped/ignored).
KNOWN_CATS = (
    frozenset(DEVICE_CATS)
    | frozenset(HOST_CATS)
    | {"Trace", "python_function", "overhead", "cuda_profiler_range", "ac2g", "async_cpu_to_gpu", "fwdbwd"}
)
_MAX_RANK = 2**31 - 1
_TIME_LIMIT = 2**62
# Plausibility from the trace itself: an event may end at most this far past the trace's last host event (or, when
# the trace is longer, one trace length past it), and last at most twice the span of the trace's starts (at least
# this much longer than it). Past either it is a corrupt number, not a measurement (docs/robustness.md).
PLAUSIBLE_MARGIN_NS = 1_000_000_000
_MIX = np.uint64(0x9E3779B97F4A7C15)
# the dense columns that tell events apart; duplicate candidates must agree in them (then in all COLUMNS)
_HASHED = ("ts_ns", "dur_ns", "name_id", "kind", "pid", "stream", "correlation", "external_id", "cat_id")


def check_header(trace, path: str) -> None:
    """Header fields that would otherwise overflow the int64 time columns."""
    base = trace.baseTimeNanoseconds
    if base is not None and not 0 <= base < 2**62:
        raise TraceFormatError(f"{path}: baseTimeNanoseconds {base} is out of range (0 to 2**62 ns); the trace header is corrupt")


def check_table(table: EventTable, info: RankInfo, path: str, max_string_bytes: int) -> tuple[EventTable, RankInfo]:
    """String-length limit (error), exact duplicate events (dropped), unknown categories (warning)."""
    check_strings(table, path, max_string_bytes)
    warnings: list[str] = []
    bad = out_of_range_times(table)
    dropped = info.dropped
    if bad.any():
        dropped = dropped.plus("range", int(bad.sum()), [UNKNOWN_NS] * int(bad.sum()), table["correlation"][bad].tolist())
        table = table.select(~bad)
        warnings.append(
            f"{path}: dropped {int(bad.sum())} events whose time or end lies beyond ±2**62 ns "
            "(huge numbers in ts/dur; corrupt events); the steps they belonged to are marked incomplete"
        )
    odd = implausible_times(table)
    if odd.any():
        dropped = dropped.plus("implausible", int(odd.sum()), table["ts_ns"][odd].tolist(), table["correlation"][odd].tolist())
        table = table.select(~odd)
        warnings.append(
            f"{path}: dropped {int(odd.sum())} events with an implausible duration (longer than twice the span of "
            "the trace's starts) or end (more than max(1 s, the trace's span) past its last host event): corrupt "
            "numbers, not measurements; the steps they belonged to are marked incomplete"
        )
    if dropped is not info.dropped:
        info = replace(info, dropped=dropped)
    dup = duplicate_rows(table)
    if dup.any():
        table = table.select(~dup)
        warnings.append(
            f"{path}: dropped {int(dup.sum())} exact duplicate events (the same event written twice; "
            "a merged or re-exported trace?)"
        )
    unknown = unknown_categories(table)
    if unknown:
        shown = ", ".join(f"{c!r} ×{n}" for c, n in unknown[:5]) + (" …" if len(unknown) > 5 else "")
        warnings.append(
            f"{path}: {sum(n for _, n in unknown)} events in categories tracekit does not know ({shown}) "
            "are counted as 'other', neither compute nor communication"
        )
    if warnings:
        info = replace(info, warnings=tuple(info.warnings) + tuple(warnings))
    return table, info


def check_strings(table: EventTable, path: str, max_string_bytes: int) -> None:
    for s in table.strings:
        if len(s) > max_string_bytes // 4 and len(s.encode("utf-8", "surrogatepass")) > max_string_bytes:
            raise InputLimitError(
                f"{path}: a string of {len(s.encode('utf-8', 'surrogatepass'))} bytes "
                f"(starting {s[:40]!r}) exceeds the {max_string_bytes}-byte limit; raise it with "
                "--max-string-bytes (or TRACEKIT_MAX_STRING_BYTES) if it is genuine"
            )


def out_of_range_times(table: EventTable) -> np.ndarray:
    """Rows whose start, duration or end cannot be held in int64 ns with room to subtract (also catches a
    start that wrapped around when baseTimeNanoseconds was added)."""
    ts, dur = table["ts_ns"], table["dur_ns"]
    end = ts.astype(np.float64) + dur.astype(np.float64)
    return (np.abs(ts) >= _TIME_LIMIT) | (dur < 0) | (dur >= _TIME_LIMIT) | (np.abs(end) >= _TIME_LIMIT)


def implausible_times(table: EventTable) -> np.ndarray:
    """Rows no profiler can have recorded, judged against the trace itself: a duration longer than
    max(2 S, S + 1 s), S the span of the starts (first to last); an end more than max(1 s, S) past the end of the
    trace's last host event (the host events that passed the first test). Kineto records an event once it has
    ended, while it records: every real event lies within the recording. ProfilerStep windows are left to the
    step analysis, which marks an implausible one incomplete rather than lose the step itself."""
    n = len(table)
    if n < 2:
        return np.zeros(n, dtype=bool)
    ts, dur = table["ts_ns"], table["dur_ns"]
    span = int(ts.max()) - int(ts.min())
    judged = ~table.mask_kind(EventKind.STEP)
    long = dur > max(2 * span, span + PLAUSIBLE_MARGIN_NS)
    too_long = judged & long
    end = table.end_ns
    host = (table["device"] < 0) & ~long  # an implausible step window sets no bound either
    if not host.any():
        return too_long
    last_host_end = int(end[host].max())
    late = judged & (end > last_host_end + max(PLAUSIBLE_MARGIN_NS, span))
    return too_long | late


def duplicate_rows(table: EventTable) -> np.ndarray:
    """True for the second and later copies of a row equal in every column. A 64-bit hash of the dense columns finds
    candidates (a sort of the hashes, not an argsort: numpy's vectorised sort is ~20x faster, and the candidate
    rows are then found by lookup); only the candidates are compared exactly."""
    n = len(table)
    if n < 2:
        return np.zeros(n, dtype=bool)
    with np.errstate(over="ignore"):
        h = np.zeros(n, dtype=np.uint64)
        for k in _HASHED:  # rows equal in every column are equal in these; the candidates are then compared in all
            h ^= table[k].astype(np.int64, copy=False).view(np.uint64)
            h *= _MIX
    s = np.sort(h)
    repeated = np.unique(s[1:][s[1:] == s[:-1]])
    del s
    if not len(repeated):
        return np.zeros(n, dtype=bool)
    at = np.minimum(np.searchsorted(repeated, h), len(repeated) - 1)
    cand = np.flatnonzero(repeated[at] == h)
    frame = pd.DataFrame({k: table[k][cand] for k in COLUMNS})
    out = np.zeros(n, dtype=bool)
    out[cand[frame.duplicated(keep="first").to_numpy()]] = True
    return out


def unknown_categories(table: EventTable) -> list[tuple[str, int]]:
    ids = table["cat_id"]
    ids = ids[ids >= 0]
    if not len(ids):
        return []
    counts = np.bincount(ids, minlength=len(table.strings))
    out = [(table.strings[i], int(c)) for i, c in enumerate(counts) if c and table.strings[i] not in KNOWN_CATS]
    return sorted(out, key=lambda t: -t[1])


def check_rank(info: RankInfo) -> None:
    """A rank number outside [0, world size) (or below the 'absent' marker -1) is a corrupt header."""
    r, w = info.rank, info.world_size
    if r < -1 or r > _MAX_RANK or w > _MAX_RANK or (w > 0 and r >= w):
        raise MissingRankError(
            f"{info.source}: distributedInfo gives rank {r} of world size {w}, which is "
            "impossible; the trace header is corrupt or was edited"
        )
