"""`tracekit baseline PATH -o FILE`: keep a run's JSON summary as the baseline for `tracekit check`."""

from __future__ import annotations

import click

from ..runtime.outputs import check_output
from ._analysis import window_option
from .common import build_load_options, input_files, load_options


@click.command()
@click.argument("path")
@click.option("-o", "--output", required=True, metavar="FILE", help="where to write the baseline summary JSON")
@window_option
@load_options
def baseline(path, output, window, executor, **load_kw):
    """Write the summary of the run at PATH (trace directory or summary JSON) as a baseline."""
    from .. import gate
    from ..errors import EmptyWindowError
    from ..reports.safe_text import printable

    check_output(output, input_files([path]))  # a bad output path fails before the analysis
    summary = gate.load_summary(path, window, build_load_options(**load_kw), executor, as_written=True)
    if not summary.has_data:
        why = "; ".join(summary.partial_reasons()[:2]) or "no events"
        raise EmptyWindowError(
            f"baseline: {path} has no complete step ({why}); a baseline of no data would hold nothing; record a complete run"
        )
    gate.write_summary(summary, output)
    ident = ", ".join(f"{k} {v}" for k, v in summary.identity().items() if v not in (None, {}))
    # the identity comes from run.json (workload names are untrusted text), the path from the user: both escaped
    click.echo(printable(f"baseline written to {output} ({ident or 'run identity not recorded'})"))
