"""`tracekit analyze` on a folder of Flight Recorder dumps: which folders are, and their timing analysis (with the
Kineto traces beside them compared, when there are any)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import TracekitError


def flight_folder(paths: Sequence[str], forced: bool) -> str | None:
    """The folder to analyse as Flight Recorder dumps: the one path given, when it holds dumps and (unless
    ``forced``, by ``--flight``) no Kineto trace besides them; else None (the Kineto analysis)."""
    from ..loader.flight.reading import dump_files
    from ..loader.paths import find_traces

    if len(paths) != 1 or not os.path.isdir(paths[0]):
        if forced:
            from ..errors import ConfigError

            raise ConfigError("--flight: give the one folder that holds the Flight Recorder dumps (one per rank)")
        return None
    folder = str(paths[0])
    try:
        dumps = {p for ps in dump_files(folder).values() for p in ps}
    except TracekitError:
        if forced:
            raise
        return None
    if forced:
        return folder
    try:
        traces = set(find_traces([folder]))
    except TracekitError:
        traces = set()
    if traces - dumps:
        return None
    return folder if all(looks_like_dump(p) for p in dumps) else None


_DUMP_KEYS = (b'"entries"', b'"pg_config"', b'"pg_status"')
_TRACE_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"displayTimeUnit"')


def looks_like_dump(path: str) -> bool:
    """A pickle, or JSON whose first 64 KiB name a dump's keys and none of a Chrome trace's: ``rank0.json`` of a
    Kineto run has the name of a dump (a prefix and a rank), not its content."""
    from ..formats.core import read_bytes

    try:
        head = read_bytes(path, error=TracekitError, limit_read=64 * 1024)
    except TracekitError:
        return False
    if head[:1] == b"\x80":
        return True
    return any(k in head for k in _DUMP_KEYS) and not any(k in head for k in _TRACE_KEYS)


def flight_timing(folder: str, *, dim_map=(), top: int = 10, with_kineto: bool = True, **load_kw):
    """The FlightTiming of ``folder``; with the Kineto analysis of its traces compared when it holds any."""
    from ..analyzers.flight.kineto import kineto_agreement
    from ..analyzers.flight.timing import analyze_timing
    from ..loader.flight.reading import FlightReadOptions, dump_files, read_flight_dir
    from ..loader.paths import find_traces

    run = read_flight_dir(folder, FlightReadOptions())
    timing = analyze_timing(run, dim_map, top)
    dumps = {p for ps in dump_files(folder).values() for p in ps}
    try:
        traces = [t for t in find_traces([folder]) if t not in dumps]
    except TracekitError:
        traces = []
    if not (with_kineto and traces):
        return timing
    from dataclasses import replace

    from ._analysis import analysis_from_traces

    analysis = analysis_from_traces(traces, dim_map=dim_map, **load_kw)
    note = (
        "Kineto times a collective from its gloo/NCCL span on the worker (after any queue), the Flight Recorder from "
        "its enqueue: waits differ by the queueing of collectives issued back to back; the ring also holds the "
        "collectives before the profiled steps (start-up, warm-up), which only the figures above count"
    )
    return replace(timing, kineto=kineto_agreement(run, analysis.comm.instances), notes=(*timing.notes, note))
