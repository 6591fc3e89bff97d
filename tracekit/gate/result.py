"""Results of the gate: one CheckResult per check, a GateReport for the whole run (formatting: tracekit.reports)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..formats.contract import GATE_SCHEMA
from ..formats.core import to_builtins
from ..formats.documents import CheckDoc, StatDoc, VerdictDoc
from .stats import Stat


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: a regression against the baseline or a budget. ``message`` is the one-line explanation."""

    kind: str  # "regression" or "budget"
    name: str  # "tp/all_gather:exposed_comm_us" or the budget expression
    passed: bool
    message: str
    metric: str
    scope: str = ""  # "" for the whole run, else "tp/all_gather"
    baseline: Stat | None = None
    current: Stat | None = None
    limit: float | None = None
    change: float | None = None  # (now - baseline) / baseline; None when there is no baseline value
    op: str = ""  # a budget's comparison: "<=", "<", ">=", ">"

    def to_struct(self) -> CheckDoc:
        """The check as ``tracekit.gate/1`` writes it (a float that is not finite is written null)."""
        return CheckDoc(
            kind=self.kind,
            name=self.name,
            passed=self.passed,
            message=self.message,
            metric=self.metric,
            scope=self.scope,
            baseline=_stat(self.baseline),
            current=_stat(self.current),
            limit=_finite(self.limit),
            op=self.op,
            change=_finite(self.change),
        )

    def to_dict(self) -> dict[str, Any]:
        return to_builtins(self.to_struct())


@dataclass(frozen=True, slots=True)
class GateReport:
    """Every check of one `tracekit check`; ``passed`` when none failed."""

    checks: tuple[CheckResult, ...]
    current_source: str = ""
    baseline_source: str = ""
    identity: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # the load's and the analysis' warnings of the run checked

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if not c.passed)

    @property
    def passed(self) -> bool:
        return not self.failures

    def headline(self) -> str:
        n, f = len(self.checks), len(self.failures)
        return f"tracekit check: {'PASSED' if not f else 'FAILED'}: {n - f} of {n} checks passed" + (f", {f} failed" if f else "")

    def to_struct(self) -> VerdictDoc:
        """The verdict as ``tracekit check --json`` writes it and ``tracekit report --verdict`` reads it back."""
        return VerdictDoc(
            schema=GATE_SCHEMA,
            passed=self.passed,
            current=self.current_source,
            baseline=self.baseline_source,
            run=dict(self.identity),
            notes=list(self.notes),
            warnings=list(self.warnings),
            checks=[c.to_struct() for c in self.checks],
        )

    def to_dict(self) -> dict[str, Any]:
        return to_builtins(self.to_struct())


def _finite(v: float | None) -> float | None:
    """The verdict's numbers: a change from a zero baseline or an absurd input never becomes a NaN token."""
    return v if v is None or math.isfinite(v) else None


def _stat(s: Stat | None) -> StatDoc | None:
    if s is None:
        return None
    return StatDoc(
        median=_finite(s.median),
        min=_finite(s.lo),
        max=_finite(s.hi),
        q1=_finite(s.q1),
        q3=_finite(s.q3),
        samples=s.samples,
        basis=s.basis,
    )
