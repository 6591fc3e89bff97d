"""`tracekit diff A B`: side by side per dimension × op and per collective call site, and why B is more exposed."""

from __future__ import annotations

import click


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--top", default=10, show_default=True, type=click.IntRange(0), help="call sites to show")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def diff(a, b, top, fmt):
    """Compare run A (before) with run B (after); each is a trace directory or a summary JSON."""
    from .. import gate
    from .output import emit

    emit(gate.diff(gate.load_summary(a), gate.load_summary(b), top=top), fmt, indent=1)
