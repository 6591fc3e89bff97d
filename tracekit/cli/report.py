"""`tracekit report PATH... -o report.html`: the self-contained HTML report (or JSON by suffix/--format)."""

from __future__ import annotations

import click

from .. import units
from ..errors import ConfigError
from ..reports import get_reporter
from ..reports.base import check_summary
from ..reports.safe_text import printable
from ..reports.timeline_drawing import DEFAULT_MAX_EVENTS
from ..runtime.outputs import check_output
from ._analysis import allow_partial_option, analysis_from_traces, analysis_options
from .common import input_files


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option(
    "-o",
    "--out",
    default="report.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="Output file; its suffix picks the format unless --format is given.",
)
@click.option("--format", "fmt", type=click.Choice(["html", "json"]), default=None)
@click.option(
    "--summary",
    "summary_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Render an existing tracekit.summary/1 JSON instead of analysing traces.",
)
@click.option(
    "--timeline",
    "timeline_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A tracekit.timeline/1 JSON for the timeline section (default: from the analysis).",
)
@click.option(
    "--verdict",
    "verdict_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The CI gate's JSON verdict, shown at the top of the report.",
)
@click.option(
    "--max-timeline-events",
    default=DEFAULT_MAX_EVENTS,
    show_default=True,
    type=int,
    help="Above this many timeline intervals, merge short gaps so the page stays small.",
)
@click.option(
    "--plotly",
    type=click.Choice(["inline", "cdn"]),
    default="inline",
    show_default=True,
    help="inline: plotly.js (its 1.4 MiB cartesian bundle) inside the page, which opens offline; cdn: a page of "
    "tens of kB that loads plotly.js from cdn.plot.ly (its tables need no network, its charts do).",
)
@analysis_options
@allow_partial_option
def report(paths, out, fmt, summary_path, timeline_path, verdict_path, max_timeline_events, plotly, **analysis) -> None:
    """Write a report of the traces (files or directories) in PATHS."""
    if bool(paths) == bool(summary_path):
        raise ConfigError("report: give trace PATHS or --summary FILE (exactly one of them)")
    check_output(out, input_files(paths) + [p for p in (summary_path, timeline_path, verdict_path) if p])
    from ..formats.documents import read_timeline, read_verdict
    from ..formats.summary import as_dict, read_summary

    timeline = read_timeline(timeline_path) if timeline_path else None
    if summary_path:
        summary = as_dict(read_summary(summary_path, error=ConfigError))
    else:
        result = analysis_from_traces(paths, **analysis)
        summary = result.to_dict()
        timeline = timeline if timeline is not None else result.timeline()
    verdict = read_verdict(verdict_path) if verdict_path else None
    reporter = get_reporter(fmt, out)
    check_summary(summary)  # a report file holds a tracekit.summary/1, whichever the format
    done = reporter.render(
        summary,
        out,
        timeline=timeline,
        verdict=verdict,
        max_timeline_events=max_timeline_events,
        plotly=plotly,
        sort_keys=True,
        allow_nan=False,
    )
    for note in done.notes:
        click.echo(f"tracekit: note: {printable(note)}", err=True)
    click.echo(f"wrote {done.path} ({units.mib(done.size_bytes)})", err=True)
