"""`tracekit annotate TRACE -o OUT.json.gz`: a copy of one rank's trace with tracekit's tracks added."""

from __future__ import annotations

import click

from ..errors import ConfigError
from ..formats.tracks import read_tracks
from ..loader.decode import StreamLimits
from ..loader.passthrough import read_trace_bytes
from ..reports.perfetto import TraceAnnotation, tracks_from_intervals
from ..reports.safe_text import printable
from ._analysis import analysis_from_traces, analysis_options
from .common import build_load_options
from .output import write


def tracks_from_analysis(result, rank: int | None) -> tuple[dict, frozenset]:
    """Exposed/hidden comm tracks from the rank's analysis (all steps) and one track per parallel dimension; and
    the pids of the rank's loaded events."""
    ranks = result.traces.ranks
    if len(ranks) == 1:  # one trace: its rank, whatever --rank says (a trace without distributedInfo is rank 0)
        rank = ranks[0]
    elif rank not in ranks:
        raise ConfigError(f"annotate: the traces hold ranks {ranks}; pick one with --rank")
    intervals, collectives = result.annotation(rank)
    pids = frozenset(int(p) for p in set(result.traces.table(rank)["pid"].tolist()))
    return tracks_from_intervals(intervals, collectives), pids


@click.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="OUT.json.gz (or .json)")
@click.option("--rank", type=int, default=None, help="The rank the trace belongs to, if it cannot be read from it.")
@click.option("--tracks", "tracks_path", type=click.Path(exists=True, dir_okay=False),
              help='JSON {"track name": [[start_us, end_us], ...]} in the trace\'s own time base, instead of analysing.')
@analysis_options
def annotate(trace, out, rank, tracks_path, **analysis) -> None:
    """Add exposed/hidden/per-dimension communication tracks to TRACE for Perfetto or chrome://tracing."""
    table_pids: frozenset = frozenset()
    if tracks_path:
        tracks = read_tracks(tracks_path)
    else:
        tracks, table_pids = tracks_from_analysis(analysis_from_traces([trace], **analysis), rank)
    opts = build_load_options(**analysis)  # the loader's limits, as the analysis had them
    limits = StreamLimits(opts.max_bytes, opts.max_string_bytes, opts.max_gzip_ratio)
    source = read_trace_bytes(trace, limits)  # the original bytes: every event is written back unchanged
    for warning in source.warnings:
        click.echo(printable(f"tracekit: note: {warning}"), err=True)
    if source.truncated:
        click.echo("tracekit: note: the annotated copy holds the complete events before the cut, closed with ']}', "
                   "then tracekit's tracks", err=True)
    pids = source.pids if source.pids is not None else table_pids
    written = write(TraceAnnotation(source.members, tracks, pids), "perfetto", out).path
    n = sum(len(v) for v in tracks.values())
    click.echo(printable(f"wrote {written} ({len(tracks)} tracks, {n} intervals)"), err=True)
