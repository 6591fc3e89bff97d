"""`tracekit annotate TRACE -o OUT.json.gz`: a copy of one rank's trace with tracekit's tracks added;
`tracekit annotate DIR -o merged.json.gz` (or several traces): every rank in one trace on the corrected clock."""

from __future__ import annotations

import os
from functools import partial

import click

from ..errors import ConfigError
from ..formats.tracks import read_tracks
from ..loader.decode import StreamLimits
from ..loader.passthrough import read_trace_bytes
from ..reports.perfetto import TraceAnnotation, critical_track, tracks_from_intervals
from ..reports.perfetto_merge import MergedTrace, MergeRank
from ..reports.safe_text import printable
from ..runtime.outputs import check_output
from ._analysis import analysis_from_traces, analysis_options
from .common import build_load_options, input_files
from .output import write


def _offsets(result) -> dict[int, int]:
    """rank -> clock offset (ns; subtract from the rank's times to put them on the reference rank's clock)."""
    return {o.rank: int(round(o.offset_ns)) for o in result.comm.cross.offsets}


def tracks_from_analysis(result, rank: int | None) -> tuple[dict, frozenset]:
    """Exposed/hidden comm tracks from the rank's analysis (all steps), one track per parallel dimension and, when
    the analysis found it, the critical path; and the pids of the rank's loaded events."""
    ranks = result.traces.ranks
    if len(ranks) == 1:  # one trace: its rank, whatever --rank says (a trace without distributedInfo is rank 0)
        rank = ranks[0]
    elif rank is None or rank not in ranks:
        raise ConfigError(f"annotate: the traces hold ranks {ranks}; pick one with --rank")
    intervals, collectives = result.annotation(rank)
    pids = frozenset(int(p) for p in set(result.traces.table(rank)["pid"].tolist()))
    tracks = tracks_from_intervals(intervals, collectives)
    if result.critical is not None:  # on the rank's own clock, in its trace's time base
        shift = _offsets(result).get(rank, 0) - result.traces.info(rank).base_time_ns
        tracks.update(critical_track(result.critical.steps, shift))
    return tracks, pids


def _limits(analysis) -> StreamLimits:
    opts = build_load_options(**analysis)  # the loader's limits, as the analysis had them
    return StreamLimits(opts.max_bytes, opts.max_string_bytes, opts.max_gzip_ratio)


def _read(path: str, limits: StreamLimits):
    source = read_trace_bytes(path, limits)  # the original bytes: every event is written back unchanged
    for warning in source.warnings:
        click.echo(printable(f"tracekit: note: {warning}"), err=True)
    return source


def merged(paths, out, analysis) -> None:
    """Every rank of ``paths`` in one trace: clock offsets applied, pids and ids per rank, the critical path."""
    analysis["critical_path"] = True
    result = analysis_from_traces(paths, **analysis)
    offsets, limits, traces = _offsets(result), _limits(analysis), result.traces
    ref = traces.ranks[0]
    base = traces.info(ref).base_time_ns - offsets.get(ref, 0)
    ranks = [
        MergeRank(
            r,
            partial(_read, traces.info(r).source, limits),
            traces.info(r).base_time_ns - offsets.get(r, 0) - base,
            offsets.get(r, 0),
            traces.info(r).source,
        )
        for r in traces.ranks
    ]
    if any(not m.source for m in ranks):
        raise ConfigError("annotate: a rank of the traces has no source file to merge; pass the trace files")
    tracks = critical_track(result.critical.steps, -base)
    done = write(MergedTrace(ranks, base, tracks), "perfetto-merged", out)
    for note in done.notes:
        click.echo(printable(f"tracekit: note: {note}"), err=True)
    n = len(tracks["critical path"])
    click.echo(
        printable(
            f"wrote {done.path} ({len(ranks)} ranks on rank {ref}'s clock, critical path of "
            f"{len(result.critical.steps)} steps in {n} segments)"
        ),
        err=True,
    )


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="OUT.json.gz (or .json)")
@click.option("--rank", type=int, default=None, help="The rank the trace belongs to, if it cannot be read from it.")
@click.option(
    "--tracks",
    "tracks_path",
    type=click.Path(exists=True, dir_okay=False),
    help='JSON {"track name": [[start_us, end_us], ...]} in the trace\'s own time base, instead of analysing.',
)
@analysis_options
def annotate(paths, out, rank, tracks_path, **analysis) -> None:
    """Add exposed/hidden/per-dimension communication tracks (and with --critical-path the critical path) to one
    TRACE for Perfetto or chrome://tracing; given a directory or several traces, write every rank into one trace
    on the corrected common clock, with the critical path as a track."""
    check_output(out, input_files(paths) + ([tracks_path] if tracks_path else []))  # before the analysis
    if len(paths) > 1 or os.path.isdir(paths[0]):
        if tracks_path:
            raise ConfigError("annotate: --tracks is for one trace; a merged trace takes its tracks from the analysis")
        merged(paths, out, analysis)
        return
    trace = paths[0]
    table_pids: frozenset = frozenset()
    if tracks_path:
        tracks = read_tracks(tracks_path)
    else:
        tracks, table_pids = tracks_from_analysis(analysis_from_traces([trace], **analysis), rank)
    source = _read(trace, _limits(analysis))
    if source.truncated:
        click.echo(
            "tracekit: note: the annotated copy holds the complete events before the cut, closed with ']}', "
            "then tracekit's tracks",
            err=True,
        )
    pids = source.pids if source.pids is not None else table_pids
    written = write(TraceAnnotation(source.members, tracks, pids), "perfetto", out).path
    n = sum(len(v) for v in tracks.values())
    click.echo(printable(f"wrote {written} ({len(tracks)} tracks, {n} intervals)"), err=True)
