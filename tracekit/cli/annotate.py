"""`tracekit annotate TRACE -o OUT.json.gz`: a copy of one rank's trace with tracekit's tracks added."""

from __future__ import annotations

import click

from ..errors import ConfigError
from ..reports.perfetto import annotate_trace, read_trace, tracks_from_intervals, write_trace
from ._analysis import read_json, summary_from_traces


def _tracks_from_summary(summary: dict, rank: int | None) -> tuple[dict, list[str]]:
    ranks = [r["rank"] for r in summary.get("ranks", [])]
    if rank is None:
        if len(ranks) != 1:
            raise ConfigError(f"annotate: the trace holds ranks {ranks}; pick one with --rank")
        rank = ranks[0]
    timeline = summary.get("timeline") or {}
    intervals = [iv for r in timeline.get("ranks", []) if r.get("rank") == rank for iv in r.get("intervals", [])]
    notes = [] if intervals else ["the analysis gave no interval timeline: only the per-dimension tracks are written"]
    cols = [c for c in summary.get("collectives") or [] if c.get("rank") == rank]
    return tracks_from_intervals(intervals, cols), notes


@click.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="OUT.json.gz (or .json)")
@click.option("--rank", type=int, default=None, help="The rank the trace belongs to, if it cannot be read from it.")
@click.option("--tracks", "tracks_path", type=click.Path(exists=True, dir_okay=False),
              help='JSON {"track name": [[start_us, end_us], ...]} in the trace\'s own time base, instead of analysing.')
def annotate(trace, out, rank, tracks_path) -> None:
    """Add exposed/hidden/per-dimension communication tracks to TRACE for Perfetto or chrome://tracing."""
    if tracks_path:
        tracks, notes = read_json(tracks_path, "tracks"), []
    else:
        tracks, notes = _tracks_from_summary(summary_from_traces([trace]), rank)
    written = write_trace(annotate_trace(read_trace(trace), tracks), out)
    for note in notes:
        click.echo(f"tracekit: note: {note}", err=True)
    n = sum(len(v) for v in tracks.values())
    click.echo(f"wrote {written} ({len(tracks)} tracks, {n} intervals)", err=True)
