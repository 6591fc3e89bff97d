"""`tracekit analyze PATH`: hidden vs exposed communication, per dimension, stragglers (table or JSON)."""

from __future__ import annotations

import click

from ..runtime.outputs import check_output, open_output, write_output
from ._analysis import allow_partial_option, analysis_from_traces, analysis_options
from .common import input_files
from .output import text


def _write(data: str, out: str | None) -> None:
    if out:
        write_output(out, data)
    else:
        click.echo(data, nl=False)


_NOT_IN_KEY = ("executor", "cache_dir", "no_cache")  # where and how, not what: the same summary either way


def _cached_summary(paths, analysis) -> dict:
    """The summary from the analysis cache (tracekit/formats/analysis_cache.py) when it holds one for exactly
    these traces, options and code; else analysed, and stored for next time."""
    from ..formats import analysis_cache
    from .progress import progress

    options = {k: v for k, v in analysis.items() if k not in _NOT_IN_KEY}
    wanted = analysis_cache.key(paths, options, analysis.get("comm_rules"))
    where = analysis_cache.entry_path(paths, options, analysis.get("cache_dir"))
    summary, broken = analysis_cache.lookup(where, wanted)
    if summary is not None:
        return summary
    with progress("loading and analysing the traces"):  # a spinner on a terminal's stderr only
        result = analysis_from_traces(paths, **analysis)
    summary = result.to_dict()
    if analysis_cache.key(paths, options, analysis.get("comm_rules")) == wanted:  # unchanged during the load
        analysis_cache.store(where, wanted, summary)  # best effort, as the Parquet cache: unwritable is no error
    if broken is not None:
        summary = {
            **summary,
            "warnings": [
                *summary.get("warnings", []),
                f"ignored the analysis cache entry {where} ({broken}); analysed the traces again",
            ],
        }
    return summary


def _flight(folder, fmt, out, width, top, analysis) -> None:
    """The Flight Recorder timing of a folder of dumps, as a table, JSON or Markdown."""
    from ._flight import flight_timing

    if out:
        check_output(out)
    kw = {k: analysis[k] for k in ("executor", "no_cache", "cache_dir", "comm_pattern", "comm_rules") if k in analysis}
    timing = flight_timing(folder, dim_map=analysis.get("dim_map", ()), top=top, **kw)
    if fmt == "table":
        from ..reports.terminal import DEFAULT_WIDTH, output_width

        _write(text(timing, "table", width=width or (DEFAULT_WIDTH if out else output_width())), out)
    else:
        _write(text(timing, fmt, indent=2) if fmt == "json" else text(timing, fmt), out)


@click.command()
@click.argument("path", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    help="table (terminal), json (the tracekit.summary/1 document) or markdown (for issues and CI job summaries).",
)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the output to FILE.")
@click.option(
    "--timeline-out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the tracekit.timeline/1 JSON (one representative step per rank) for `report --timeline`.",
)
@click.option(
    "--collectives-out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write every collective instance to FILE.parquet (the summary keeps the most exposed only).",
)
@click.option(
    "--width",
    type=click.IntRange(min=40),
    default=None,
    help="Table width in columns (default: the terminal's; else $COLUMNS; else 160).",
)
@click.option("--wide", is_flag=True, help="Show every column (the default view leaves the rarely needed ones out).")
@click.option("--full-names", is_flag=True, help="Whole kernel signatures instead of short names.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows of the top-N tables.")
@click.option(
    "--flight",
    is_flag=True,
    help="Analyse the Flight Recorder dumps in PATH (the default for a folder of dumps without Kineto traces), "
    "compared with the Kineto traces beside them when there are any.",
)
@analysis_options
@allow_partial_option
def analyze(path, fmt, out, timeline_out, collectives_out, width, wide, full_names, top, flight=False, **analysis):
    """Overlap of communication with compute per rank and step, per collective, and across ranks."""
    from ._flight import flight_folder
    from .progress import progress

    folder = flight_folder(path, flight)
    if folder is not None:
        return _flight(folder, fmt, out, width, top, analysis)
    sources = input_files(path)
    for target in (out, timeline_out, collectives_out):  # a bad path fails now, not after the analysis
        if target:
            check_output(target, sources)
    if not (collectives_out or timeline_out or analysis.get("no_cache")):
        summary = _cached_summary(path, analysis)
    else:
        with progress("loading and analysing the traces"):  # a spinner on a terminal's stderr only
            result = analysis_from_traces(path, **analysis)
        summary = result.to_dict()
    if collectives_out:
        from ..analyzers.summary_schema import collectives_frame
        from ..formats.summary import write_collectives_table

        with open_output(collectives_out, "wb") as fh:  # pyarrow's own open: tracebacks, and UTF-8 names only
            write_collectives_table(collectives_frame(result.comm), fh)
    if timeline_out:
        with open_output(timeline_out) as f:
            f.write(text(result.timeline(), "json", indent=None, newline=False))
    if fmt == "json":
        _write(text(summary, "json", indent=2), out)
        return
    from ..reports.terminal import DEFAULT_WIDTH, output_width

    options = {"top": top, "wide": wide, "full_names": full_names}
    if fmt == "markdown":
        _write(text(summary, "markdown", **options), out)
        return
    _write(text(summary, "table", width=width or (DEFAULT_WIDTH if out else output_width()), **options), out)
