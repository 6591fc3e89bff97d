"""`tracekit info PATH`: what the loader found in each rank's trace."""

from __future__ import annotations

import json

import click

from ..analyzers.inventory import describe
from ..loader.io import load
from ..reports.safe_text import printable
from ._analysis import window_option
from .common import build_load_options, load_options


@click.command()
@click.argument("path", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@window_option
@load_options
def info(path, fmt, executor, window, **kw):
    """Ranks, steps, event counts, streams, process groups and communication found in PATH."""
    options = build_load_options(**kw)
    ts = load(list(path), options=options, executor=executor)
    data = describe(ts, options.rules, window)
    if fmt == "json":
        click.echo(json.dumps(data, indent=2))
        return
    _print(data)


def _print(data: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(title=f"tracekit info: {len(data['ranks'])} rank(s) of world size {data['world_size']}")
    for col in ("rank", "device", "events", "steps", "device streams", "kernels", "comm", "host ops"):
        table.add_column(col, overflow="fold")
    for r in data["ranks"]:
        k, steps = r["kinds"], r["steps"]
        table.add_row(
            str(r["rank"]), escape(printable(r["device_type"])), f"{r['events']:,}",
            f"{len(steps)} ({steps[0]}..{steps[-1]})" if steps else "0",
            escape(printable(", ".join(r["streams"][:6])) + (" …" if len(r["streams"]) > 6 else "")) or "-",
            f"{k.get('kernel', 0):,}", f"{k.get('comm', 0):,}", f"{k.get('cpu_op', 0):,}",
        )
    console.print(table)
    for r in data["ranks"]:
        lines = ["format: " + ", ".join(f"{a}={b}" for a, b in r["generation"].items())]
        if r["collectives"]:
            lines.append("collectives (op@group): " + ", ".join(f"{c} ×{n}" for c, n in sorted(r["collectives"].items())))
        if r["comm_by_library"]:
            lines.append(f"communication by rule: {r['comm_by_library']}")
        lines += [f"process group {pg['name']} '{pg['desc']}' ranks {pg['ranks']}" for pg in r["process_groups"]]
        for line in lines:
            console.print(escape(printable(f"rank {r['rank']}: {line}")))
    for w in data["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {escape(printable(w))}")
