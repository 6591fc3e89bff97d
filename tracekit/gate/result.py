"""Results of the gate: one CheckResult per check, a GateReport for the whole run; value formatting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .stats import Stat


def fmt_value(metric: str, value: float | None) -> str:
    """A metric's value with its unit, as the one-line messages show it."""
    if value is None:
        return "n/a"
    if metric.endswith("_us"):
        return f"{value:.1f} µs"
    if metric == "busbw_gbps":
        return f"{value:.2f} GB/s"
    if metric in ("bytes", "count"):
        return f"{value:.0f}" + (" B" if metric == "bytes" else "")
    return f"{value:.3f}"


def fmt_stat(metric: str, stat: Stat | None) -> str:
    """``125.0 µs (steps 120.0..130.0)``: the median and the spread of the per-step values."""
    if stat is None:
        return "n/a"
    spread = stat.spread_text(lambda v: fmt_value(metric, v).split(" ")[0])
    return f"{fmt_value(metric, stat.median)} ({spread})"


def fmt_change(change: float | None) -> str:
    if change is None:
        return "new"
    return f"{change * 100:+.1f}%"


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

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "passed": self.passed, "message": self.message,
                "metric": self.metric, "scope": self.scope,
                "baseline": None if self.baseline is None else self.baseline.to_dict(),
                "current": None if self.current is None else self.current.to_dict(),
                "limit": self.limit, "op": self.op, "change": self.change}


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
        return f"tracekit check: {'PASSED' if not f else 'FAILED'}: {n - f} of {n} checks passed" + (
            f", {f} failed" if f else "")

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "tracekit.gate/1", "passed": self.passed, "current": self.current_source,
                "baseline": self.baseline_source, "run": dict(self.identity), "notes": list(self.notes),
                "warnings": list(self.warnings),
                "checks": [c.to_dict() for c in self.checks]}
