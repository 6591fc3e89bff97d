"""`tracekit analyze PATH`: hidden vs exposed communication, per dimension, stragglers (table or JSON)."""

from __future__ import annotations

import json

import click

from ..analyzers import analyze as run_analysis
from ..model.io import load
from .common import build_load_options, load_options


@click.command()
@click.argument("path", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the output to FILE.")
@click.option("--dim-map", multiple=True, metavar="PATTERN=DIM",
              help="Process group (desc or name, shell pattern) -> parallel dimension (repeatable).")
@click.option("--no-align-clocks", is_flag=True, help="Do not correct clock offsets between ranks.")
@load_options
def analyze(path, fmt, out, dim_map, no_align_clocks, executor, **kw):
    """Overlap of communication with compute per rank and step, per collective, and across ranks."""
    ts = load(list(path), options=build_load_options(**kw), executor=executor)
    summary = run_analysis(ts, dim_map=dim_map, align_clocks=not no_align_clocks).to_dict()
    if fmt == "json":
        text = json.dumps(summary, indent=2)
        if out:
            with open(out, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        else:
            click.echo(text)
        return
    from .analyze_table import render_summary

    render_summary(summary, out)
