"""`tracekit baseline PATH -o FILE`: keep a run's JSON summary as the baseline for `tracekit check`."""

from __future__ import annotations

import click


@click.command()
@click.argument("path")
@click.option("-o", "--output", required=True, metavar="FILE", help="where to write the baseline summary JSON")
def baseline(path, output):
    """Write the summary of the run at PATH (trace directory or summary JSON) as a baseline."""
    from .. import gate

    summary = gate.load_summary(path)
    gate.write_summary(summary, output)
    ident = ", ".join(f"{k} {v}" for k, v in summary.identity().items() if v not in (None, {}))
    click.echo(f"baseline written to {output} ({ident or 'run identity not recorded'})")
