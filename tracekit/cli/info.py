"""`tracekit info PATH`: what the loader found in each rank's trace."""

from __future__ import annotations

import click

from ..analyzers.comm.inventory import describe
from ..loader.loading import load
from ._analysis import window_option
from .common import build_load_options, load_options
from .output import emit


@click.command()
@click.argument("path", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@window_option
@load_options
def info(path, fmt, executor, window, **kw):
    """Ranks, steps, event counts, streams, process groups and communication found in PATH."""
    options = build_load_options(**kw)
    ts = load(list(path), options=options, executor=executor)
    emit(describe(ts, options.rules, window), fmt, indent=2)
