"""`tracekit hang DIR`: read every rank's Flight Recorder dump and say who hung, on which collective, and why.

Exit 1 when a group hangs or its members disagree (a suspect or a mismatch), 0 when every group is consistent,
3 when no dump can be read."""

from __future__ import annotations

import sys

import click

from ..runtime.outputs import check_output, write_output
from .output import text


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
    help="table (terminal), json (suspect_ranks, groups, mismatches, evidence) or markdown.",
)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the report to FILE.")
@click.option("--prefix", default=None, help="File-name prefix before the rank (default: the one the dumps share).")
@click.option(
    "--world-size",
    type=click.IntRange(min=1),
    default=None,
    help="The run's ranks are 0..N-1 (default: from run.json, the dumps' group configs and the file names).",
)
@click.option(
    "--dim-map",
    multiple=True,
    metavar="PATTERN=DIM",
    help="Process group (desc or name, shell pattern) -> parallel dimension (repeatable).",
)
@click.option(
    "--max-dump-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Refuse dumps larger than this (default 1 GiB; TRACEKIT_MAX_DUMP_BYTES).",
)
@click.option("--width", type=click.IntRange(min=40), default=None, help="Table width in columns.")
def hang(directory, fmt, out, prefix, world_size, dim_map, max_dump_bytes, width):
    """Who hung, on which collective of which group, and why, from Flight Recorder dumps (one per rank)."""
    from ..analyzers.flight.hang import analyze_hang
    from ..loader.flight.reading import DEFAULT_MAX_DUMP_BYTES, FlightReadOptions, read_flight_dir

    if out:
        check_output(out)
    options = FlightReadOptions(prefix, max_dump_bytes or DEFAULT_MAX_DUMP_BYTES, world_size)
    report = analyze_hang(read_flight_dir(directory, options), dim_map)
    if fmt == "table":
        from ..reports.terminal import DEFAULT_WIDTH, output_width

        rendered = text(report, "table", width=width or (DEFAULT_WIDTH if out else output_width()))
    else:
        rendered = text(report, fmt, indent=2) if fmt == "json" else text(report, fmt)
    if out:
        write_output(out, rendered)
        for w in report.warnings:
            click.echo(f"tracekit hang: warning: {w}", err=True)
    else:
        click.echo(rendered, nl=False)
    sys.exit(1 if report.hung else 0)
