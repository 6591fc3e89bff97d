"""`tracekit whatif PATH --set SPEC ...`: measured vs predicted step time with changed durations."""

from __future__ import annotations

import json

import click

from ..reports.safe_text import printable
from ._analysis import analysis_options
from .common import build_load_options


@click.command()
@click.argument("path", nargs=-1, required=True)
@click.option(
    "--set",
    "specs",
    multiple=True,
    metavar="SPEC",
    help="comm:DIM=F (transfer time of a dimension's collectives x F; 0 is free), kernel:REGEX=F, "
    "annotation:NAME=F (host time inside an annotation), rank:R:host=F. Repeatable.",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@analysis_options
def whatif(path, specs, fmt, dim_map, no_align_clocks, executor, window, instance, critical_path, **load_kw):
    """Re-time the dependency graph of every step (all ranks) with changed durations, keeping every dependency;
    with no --set, the replay of the unchanged graph (its error says how complete the graph is). --window: the
    instances of an annotation are the steps, as on `tracekit analyze`."""
    del critical_path  # whatif always finds the critical path; the flag is shared with analyze
    from ..analyzers.comm.communication import CommAnalyzer, CommOptions
    from ..analyzers.graph.build import build_graph
    from ..analyzers.graph.critical_path import critical_paths
    from ..analyzers.graph.whatif import Spec
    from ..analyzers.graph.whatif import whatif as run_whatif
    from ..loader.loading import load

    parsed = [Spec.parse(s) for s in specs]  # a bad spec is a usage error before any trace is read
    if instance is not None and window is None:
        raise click.UsageError("--instance K takes the K-th instance of the --window annotation: give --window NAME too")
    ts = load([str(p) for p in path], options=build_load_options(**load_kw), executor=executor)
    options = CommOptions(dim_map=tuple(dim_map), align_clocks=not no_align_clocks, window=window, instance=instance)
    comm = CommAnalyzer().run(ts, options)
    graph = build_graph(ts, window, comm)
    result = run_whatif(ts, parsed, graph=graph)
    paths = critical_paths(ts, graph=graph)
    after = critical_paths(ts, graph=graph, specs=parsed) if parsed else None
    if fmt == "json":
        doc = result.to_dict()
        doc["critical_path"] = _summary(paths)
        if after is not None:
            doc["predicted_critical_path"] = _summary(after)
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(printable(_table(result, paths, after), multiline=True))  # kernel and annotation names: trace text


def _summary(paths) -> dict:
    return {"verdict": paths.verdict, "steps": [{k: v for k, v in s.to_dict().items() if k != "segments"} for s in paths.steps]}


def _table(result, paths, after) -> str:
    try:  # the units module moved to tracekit.units on main (the 'output' branch); both say the same
        from ..units import duration as fmt_us  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from ..reports.view import fmt_us  # type: ignore[no-redef,attr-defined,unused-ignore]

    spec = ", ".join(result.specs) or "no change (identity replay)"
    lines = [f"what if: {spec}", f"{'step':>6}  {'measured':>12}  {'predicted':>12}  {'ratio':>6}"]
    for s in result.steps:
        lines.append(f"{s.step:>6}  {fmt_us(s.measured_ns / 1e3):>12}  {fmt_us(s.predicted_ns / 1e3):>12}  {s.ratio:>6.3f}")
    lines.append(f"replay error of the unchanged graph: {100 * result.replay_error:.3f} %")
    lines.append(f"critical path: {paths.verdict}")
    if after is not None:
        lines.append(f"critical path after the change: {after.verdict}")
    lines += [f"note: {n}" for n in result.notes + paths.notes]
    return "\n".join(lines)
