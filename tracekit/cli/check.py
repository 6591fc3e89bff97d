"""`tracekit check PATH`: hold a run against a baseline and budgets. Exit 0 pass, 1 a check failed,
2 usage error (bad option or budget), 3 bad input (unreadable run or baseline, or runs that cannot be compared)."""

from __future__ import annotations

import click

from ..errors import ConfigError, TracekitError
from ..reports.safe_text import printable
from ..runtime.outputs import check_output
from ._analysis import window_option
from .common import build_load_options, input_files, load_options

_METRIC_HELP = (
    "metric to hold against the baseline, repeatable; replaces the defaults (exposed_comm_us, "
    "exposed_comm_share, overlap_ratio and '*/*:exposed_comm_us'). Whole run: NAME; one dimension/op: "
    "tp/all_gather:NAME; each dimension/op: '*/*:NAME'"
)


@click.command()
@click.argument("path")
@click.option("--baseline", "baseline_path", metavar="FILE", help="summary JSON written by `tracekit baseline`")
@click.option(
    "--max-regression",
    default="10%",
    show_default=True,
    metavar="PCT",
    help="allowed change relative to the baseline median, e.g. 10% or 0.10",
)
@click.option(
    "--budget",
    "budgets",
    multiple=True,
    metavar="EXPR",
    help="absolute budget, repeatable: 'exposed_comm_share<=0.15', 'tp/all_gather:exposed_comm_us<=800'",
)
@click.option("--metric", "metrics", multiple=True, metavar="SPEC", help=_METRIC_HELP)
@click.option(
    "--min-delta-us",
    default=50.0,
    show_default=True,
    type=float,
    help="changes in a time smaller than this are never a regression",
)
@click.option(
    "--min-delta-ratio",
    default=0.02,
    show_default=True,
    type=float,
    help="changes in a ratio smaller than this are never a regression",
)
@click.option("--junit", "junit_path", metavar="FILE", help="write JUnit XML, one testcase per check")
@click.option("--markdown", "markdown_path", metavar="FILE", help="write a Markdown summary (CI job summary)")
@click.option("--json", "json_path", metavar="FILE", help="write every check as JSON")
@click.option("-q", "--quiet", is_flag=True, help="print only failures and the verdict")
@click.option("--strict", is_flag=True, help="fail the gate on any warning of the load or the analysis")
@click.option("--allow-partial", is_flag=True, help="gate a truncated run on its complete steps instead of failing it")
@window_option
@load_options
@click.pass_context
def check(
    ctx,
    path,
    baseline_path,
    max_regression,
    budgets,
    metrics,
    min_delta_us,
    min_delta_ratio,
    junit_path,
    markdown_path,
    json_path,
    quiet,
    strict,
    allow_partial,
    window,
    executor,
    **load_kw,
):
    """Check the run at PATH (trace directory or summary JSON) against a baseline and budgets."""
    from .. import gate
    from .output import emit, write

    sources = input_files([path]) + input_files([baseline_path] if baseline_path else [])
    for target in (junit_path, markdown_path, json_path):  # a bad output path fails before the analysis
        if target:
            check_output(target, sources)
    try:
        if not baseline_path and not budgets:
            raise ConfigError("check: nothing to check; give --baseline FILE and/or --budget EXPR")
        if min_delta_us < 0 or min_delta_ratio < 0:
            raise ConfigError("check: --min-delta-us and --min-delta-ratio must be >= 0")
        parsed = tuple(gate.parse_budget(b) for b in budgets)
        opts = gate.GateOptions(
            gate.parse_fraction(max_regression),
            min_delta_us,
            min_delta_ratio,
            tuple(gate.MetricSpec.parse(m) for m in metrics) or gate.DEFAULT_METRICS,
        )
        current = gate.load_summary(path, window, build_load_options(**load_kw), executor)
        baseline = gate.load_summary(baseline_path, window, build_load_options(**load_kw), executor) if baseline_path else None
        report = gate.run_gate(current, baseline, parsed, opts, strict=strict, allow_partial=allow_partial)
    except TracekitError as exc:  # the CI files say why there is no verdict; the CLI still prints the error and exits
        from ..reports import GateError

        err = GateError(printable(str(exc)), exc.exit_code, str(path), str(baseline_path or ""))
        for fmt, out in (("junit", junit_path), ("markdown", markdown_path)):
            if out:
                write(err, fmt, out)
        raise
    for warning in report.warnings:
        click.echo(f"warning: {printable(warning)}", err=True)
    for note in report.notes:
        click.echo(f"note: {printable(note)}", err=True)
    emit(report, "text", quiet=quiet)
    for fmt, out in (("junit", junit_path), ("markdown", markdown_path), ("json", json_path)):
        if out:
            write(report, fmt, out, indent=1)
    ctx.exit(0 if report.passed else 1)
