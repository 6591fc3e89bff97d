"""`tracekit diff A B`: side by side per dimension × op and per collective call site, and why B is more exposed."""

from __future__ import annotations

import click

from ._analysis import window_option
from .common import build_load_options, load_options


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--top", default=10, show_default=True, type=click.IntRange(0), help="call sites to show")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@window_option
@load_options
def diff(a, b, top, fmt, window, executor, **load_kw):
    """Compare run A (before) with run B (after); each is a trace directory or a summary JSON."""
    from .. import gate
    from .output import emit

    opts = (build_load_options(**load_kw), executor)
    emit(gate.diff(gate.load_summary(a, window, *opts), gate.load_summary(b, window, *opts), top=top), fmt, indent=1)
