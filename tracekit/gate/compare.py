"""Baseline vs current run: refuse to compare unlike runs, then one regression check per (scope, metric).

A check fails when the median moved the wrong way by more than ``max_regression`` relative to the baseline
AND by more than an absolute floor (``min_delta_us`` for times, ``min_delta_ratio`` for ratios), so
microsecond noise on tiny numbers is not a regression. Unlike runs raise IncomparableRunsError (exit 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import units
from ..errors import IncomparableRunsError
from .budgets import Budget, parse_target
from .metrics import LOWER_IS_WORSE, RATIO_METRICS, RunMetrics, Scope
from .result import CheckResult, GateReport
from .stats import Stat


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric to hold against the baseline: whole run (scope None), one dimension/op, or a pattern."""

    metric: str
    scope: Scope | None = None

    @classmethod
    def parse(cls, text: str) -> MetricSpec:
        scope, metric = parse_target(text, text, "--metric")
        return cls(metric, scope)


DEFAULT_METRICS = (
    MetricSpec("exposed_comm_us"),
    MetricSpec("exposed_comm_share"),
    MetricSpec("overlap_ratio"),
    MetricSpec("exposed_comm_us", Scope("*", "*")),
)


@dataclass(frozen=True, slots=True)
class GateOptions:
    max_regression: float = 0.10
    min_delta_us: float = 50.0
    min_delta_ratio: float = 0.02
    metrics: tuple[MetricSpec, ...] = DEFAULT_METRICS

    def floor(self, metric: str) -> float:
        if metric.endswith("_us"):
            return self.min_delta_us
        return self.min_delta_ratio if metric in RATIO_METRICS else 0.0


_IDENTITY_LABELS = {"world_size": "world size", "layout": "layout", "workload": "workload", "device_type": "device type"}


def _show(key: str, value) -> str:
    if key == "layout":
        return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
    return str(value)


def ensure_comparable(baseline: RunMetrics, current: RunMetrics) -> list[str]:
    """Raise IncomparableRunsError when the runs differ in world size, layout, workload or device type.
    Returns notes for fields only one side records (compared anyway)."""
    b, c = baseline.identity(), current.identity()
    diffs, notes = [], []
    for key, label in _IDENTITY_LABELS.items():
        bv, cv = b[key], c[key]
        if bv in (None, {}) and cv in (None, {}):
            continue
        if bv in (None, {}) or cv in (None, {}):
            side = "the baseline" if bv in (None, {}) else "this run"
            notes.append(f"{label} is not recorded in {side}; compared anyway")
        elif bv != cv:
            diffs.append(f"{label} differs (baseline {_show(key, bv)}, this run {_show(key, cv)})")
    if diffs:
        raise IncomparableRunsError(
            f"cannot compare {current.source} with baseline {baseline.source}: "
            + "; ".join(diffs)
            + "; record a baseline of this configuration with "
            "`tracekit baseline PATH -o FILE`"
        )
    return notes


def _regression(spec_metric: str, scope: Scope | None, b: Stat | None, c: Stat | None, opts: GateOptions) -> CheckResult | None:
    where = f"{spec_metric} (whole run)" if scope is None else f"{scope.label} {spec_metric}"
    name = spec_metric if scope is None else f"{scope.label}:{spec_metric}"
    common: dict[str, Any] = dict(
        kind="regression",
        name=name,
        metric=spec_metric,
        scope="" if scope is None else scope.label,
        baseline=b,
        current=c,
        limit=opts.max_regression,
    )
    if b is None and c is None:
        return None
    if c is None:
        return CheckResult(
            passed=True, message=f"{where}: baseline {units.metric_stat(spec_metric, b)}, no value in this run", **common
        )
    lower_worse = spec_metric in LOWER_IS_WORSE
    base = 0.0 if b is None else b.median
    if b is None and (lower_worse or spec_metric in RATIO_METRICS):
        return CheckResult(
            passed=True, message=f"{where}: now {units.metric_stat(spec_metric, c)}, not in the baseline", **common
        )
    delta = c.median - base
    change = delta / abs(base) if base else None
    worse = delta < 0 if lower_worse else delta > 0
    floor = opts.floor(spec_metric)
    failed = worse and abs(delta) > floor and (change is None or abs(change) > opts.max_regression)
    allowed = f"{'-' if lower_worse else '+'}{opts.max_regression * 100:.1f}%"
    text = (
        f"baseline {units.metric_stat(spec_metric, b) if b is not None else 'absent'}, "
        f"now {units.metric_stat(spec_metric, c)}, {units.change(change) if b is None or base else 'up from 0'}"
    )
    if failed:
        msg = f"{where} regressed: {text} (allowed {allowed})"
    elif worse and abs(delta) <= floor and (change is None or abs(change) > opts.max_regression):
        msg = f"{where}: {text}, within the {units.metric_value(spec_metric, floor)} absolute floor"
    else:
        msg = f"{where}: {text}"
    return CheckResult(passed=not failed, message=msg, change=change, **common)


def _same_basis(
    metric: str, scope: Scope | None, b: Stat | None, c: Stat | None, baseline: RunMetrics, current: RunMetrics
) -> None:
    """A run total (a summary without step rows, or whose instances were cut to the most exposed) is no per-step
    median: held against one it would pass or fail on the count of steps, not on the change. Refused."""
    if b is None or c is None or b.basis == c.basis:
        return
    where = metric if scope is None else f"{scope.label}:{metric}"
    fix = (
        "raise TRACEKIT_MAX_COLLECTIVE_ROWS so both summaries keep every collective instance"
        if scope is not None
        else "record the baseline from traces with step rows (`tracekit baseline PATH -o FILE`)"
    )
    said = {"per step": "a median over steps", "run total": "a run total"}
    raise IncomparableRunsError(
        f"cannot compare {current.source} with baseline {baseline.source}: {where} is "
        f"{said.get(b.basis, b.basis)} in the baseline and {said.get(c.basis, c.basis)} in "
        f"this run; {fix}"
    )


def compare(baseline: RunMetrics, current: RunMetrics, opts: GateOptions = GateOptions()) -> list[CheckResult]:
    """One regression check per metric spec (patterns expanded over the dimensions/ops of both runs)."""
    present = sorted(set(baseline.scopes()) | set(current.scopes()), key=lambda s: (s.dimension, s.op))
    checks = []
    for spec in opts.metrics:
        scopes = [None] if spec.scope is None else spec.scope.expand(present)
        for scope in scopes:
            b, c = baseline.stat(spec.metric, scope), current.stat(spec.metric, scope)
            _same_basis(spec.metric, scope, b, c, baseline, current)
            r = _regression(spec.metric, scope, b, c, opts)
            if r is not None:
                checks.append(r)
    return checks


def data_checks(
    current: RunMetrics, baseline: RunMetrics | None, strict: bool = False, allow_partial: bool = False
) -> list[CheckResult]:
    """No data is not success: a run (or baseline) without a complete step fails the gate, whatever the
    budgets say; so does a truncated run (the medians of its complete steps are not the run's), unless
    ``allow_partial``. With ``strict``, any warning of the load or the analysis fails it too."""
    out = []
    cut = current.truncated_ranks
    if cut and not allow_partial and current.has_data:
        out.append(
            CheckResult(
                kind="data",
                name="run is whole",
                passed=False,
                metric="steps",
                message=f"run {current.source}: the traces of ranks {cut} are truncated "
                f"({current.steps_left_out} steps incomplete); a verdict on part of the "
                "steps is not the run's: re-export the trace, or --allow-partial gates "
                "the complete steps alone",
            )
        )
    for role, s in (("run", current), ("baseline", baseline)):
        if s is not None and not allow_partial and s.lossy_steps:
            out.append(_lossy(role, s))
    for role, s in (("run", current), ("baseline", baseline)):
        if s is None or s.has_data:
            continue
        why = "; ".join(s.partial_reasons()[:3]) or "no steps and no events"
        out.append(
            CheckResult(
                kind="data",
                name=f"{role} has complete steps",
                passed=False,
                metric="steps",
                message=f"{role} {s.source} has no complete step ({why}); no budget or baseline holds on no data",
            )
        )
    if strict and current.warnings:
        out.append(
            CheckResult(
                kind="strict",
                name="no warnings",
                passed=False,
                metric="warnings",
                message=f"--strict: the run's load or analysis gave {len(current.warnings)} "
                f"warnings (first: {current.warnings[0]})",
            )
        )
    return out


def _lossy(role: str, s: RunMetrics) -> CheckResult:
    """A run (or baseline) with steps that lost events: a verdict on the rest is not the run's."""
    lossy = s.lossy_steps
    shown = ", ".join(lossy[:3]) + (f" and {len(lossy) - 3} more" if len(lossy) > 3 else "")
    return CheckResult(
        kind="data",
        name=f"{role} lost no events",
        passed=False,
        metric="steps",
        message=f"{role} {s.source}: events were dropped from {len(lossy)} step{'s' if len(lossy) != 1 else ''} as "
        f"unreadable or implausible ({shown}); a verdict without them is not the run's: fix or re-export the trace, "
        "or --allow-partial gates the complete steps alone",
    )


def run_gate(
    current: RunMetrics,
    baseline: RunMetrics | None = None,
    budgets: tuple[Budget, ...] = (),
    opts: GateOptions = GateOptions(),
    strict: bool = False,
    allow_partial: bool = False,
) -> GateReport:
    """The whole gate: comparability, complete data, regressions against the baseline (if any), then every
    budget. Incomplete steps count in no metric; a note says how many were left out."""
    notes: list[str] = []
    checks: list[CheckResult] = data_checks(current, baseline, strict, allow_partial)
    if baseline is not None:
        notes = ensure_comparable(baseline, current)
        checks.extend(compare(baseline, current, opts))
    for budget in budgets:
        checks.extend(budget.evaluate(current))
    for role, s in (("this run", current), ("the baseline", baseline)):
        if s is not None and s.steps_left_out:
            notes.append(
                f"{s.steps_left_out} incomplete steps of {role} left out of every metric ({'; '.join(s.partial_reasons()[:2])})"
            )
    return GateReport(
        tuple(checks),
        current.source,
        "" if baseline is None else baseline.source,
        current.identity(),
        tuple(notes),
        tuple(current.warnings),
    )
