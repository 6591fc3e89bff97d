"""`tracekit demo`: the main job on the embedded default -- a real 4-process TP+SP × CP ring-attention run on
CPU (gloo), its traces, the analysis, the JSON summary and the HTML report."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..reports.safe_text import printable


@click.command()
@click.option("--out", "out_dir", default="out/demo", show_default=True, type=click.Path(file_okay=False))
@click.option("--workload", default="tp-sp+cp-ring", show_default=True, help="As for `tracekit run`.")
@click.option("--tp", type=int, default=2, show_default=True)
@click.option("--cp", type=int, default=2, show_default=True)
@click.option("--steps", type=int, default=3, show_default=True)
@click.option("--overlap/--no-overlap", default=True, show_default=True)
@click.option("--verbose", is_flag=True, help="Let the profiler's own log lines (Kineto's USDT/STAGE) through.")
def demo(out_dir, workload, tp, cp, steps, overlap, verbose):
    """Run, profile, analyse and report a real multi-process workload on CPU."""
    from ..collectors.need_torch import require_torch

    require_torch("tracekit demo")
    from .. import units
    from ..collectors.workloads.config import WorkloadConfig
    from ..collectors.workloads.runner import run_workload
    from ..reports.terminal import output_width
    from ._analysis import analysis_from_traces
    from .output import text, write
    from .progress import progress

    if verbose:
        os.environ["TRACEKIT_VERBOSE"] = "1"  # read by the spawned ranks (collectors/quiet.py)
    out = Path(out_dir)
    traces = out / "traces"
    cfg = WorkloadConfig(
        workload=workload, tp=tp, cp=cp, seq=128, hidden=128, heads=8, layers=2, batch=2, overlap=overlap, steps=steps
    )
    lay = cfg.validate()
    click.echo(
        f"tracekit demo: {workload} on {lay.world_size} CPU processes (gloo), tp{lay.tp} cp{lay.cp}, "
        f"{'overlap' if overlap else 'no overlap'}, {steps} profiled steps"
    )
    with progress(f"running {lay.world_size} ranks"):
        result = run_workload(cfg, traces)
    click.echo(f"traces: {len(result.trace_paths)} rank traces and run.json in {traces}")
    with progress("loading and analysing the traces"):
        analysis = analysis_from_traces([str(traces)], executor="serial")
    summary = analysis.to_dict()
    click.echo(text(summary, "table", width=output_width()), nl=False)
    summary_path = out / "summary.json"
    write(summary, "json", summary_path, indent=1, newline=False)
    html = out / "report.html"
    done = write(summary, "html", html, timeline=analysis.timeline(), verdict=None)
    for note in done.notes:
        click.echo(printable(f"tracekit: note: {note}"), err=True)
    click.echo(f"\nsummary: {summary_path}\nreport:  {html} ({units.mib(done.size_bytes)}, opens offline)")
