"""`tracekit annotate TRACE -o OUT.json.gz`: a copy of one rank's trace with tracekit's tracks added."""

from __future__ import annotations

import click

from ..errors import ConfigError
from ..reports.perfetto import TraceAnnotation, read_trace, tracks_from_intervals
from ._analysis import analysis_from_traces, analysis_options, read_json
from .output import write


def tracks_from_analysis(result, rank: int | None) -> dict:
    """Exposed/hidden comm tracks from the rank's analysis (all steps) and one track per parallel dimension."""
    ranks = result.traces.ranks
    if len(ranks) == 1:  # one trace: its rank, whatever --rank says (a trace without distributedInfo is rank 0)
        rank = ranks[0]
    elif rank not in ranks:
        raise ConfigError(f"annotate: the traces hold ranks {ranks}; pick one with --rank")
    intervals, collectives = result.annotation(rank)
    return tracks_from_intervals(intervals, collectives)


@click.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="OUT.json.gz (or .json)")
@click.option("--rank", type=int, default=None, help="The rank the trace belongs to, if it cannot be read from it.")
@click.option("--tracks", "tracks_path", type=click.Path(exists=True, dir_okay=False),
              help='JSON {"track name": [[start_us, end_us], ...]} in the trace\'s own time base, instead of analysing.')
@analysis_options
def annotate(trace, out, rank, tracks_path, **analysis) -> None:
    """Add exposed/hidden/per-dimension communication tracks to TRACE for Perfetto or chrome://tracing."""
    if tracks_path:
        tracks = read_json(tracks_path, "tracks")
    else:
        tracks = tracks_from_analysis(analysis_from_traces([trace], **analysis), rank)
    written = write(TraceAnnotation(read_trace(trace), tracks), "perfetto", out).path
    n = sum(len(v) for v in tracks.values())
    click.echo(f"wrote {written} ({len(tracks)} tracks, {n} intervals)", err=True)
