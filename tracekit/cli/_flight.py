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
    return folder if not traces - dumps else None


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
