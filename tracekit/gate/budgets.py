"""Budget expressions: ``[dimension[/op]:]metric OP value`` with OP one of <=, <, >=, >.

Examples: ``exposed_comm_share<=0.15``, ``overlap_ratio>=30%``, ``tp/all_gather:exposed_comm_us<=800``,
``cp:wait_us<2000``. Values are plain numbers in the metric's unit (µs, bytes, GB/s, a ratio in 0..1) or, for
the ratio metrics, percentages. Whole-run metrics are medians over steps per rank, then across ranks; so are
dimension/op metrics (the sum over that step's collectives of the dimension and op). A scope without an op
(``tp:``) takes the dimension as a whole; ``*`` checks each one: ``tp/*:exposed_comm_us<=800`` holds every op of
tp to the budget, ``*/*:...`` every dimension/op of the run.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from .. import units
from ..errors import ConfigError
from .metrics import DIM_METRICS, RATIO_METRICS, RUN_METRICS, RunMetrics, Scope
from .result import CheckResult

_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_OP_RE = re.compile(r"<=|>=|==|=<|=>|!=|<|>|=")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-*]+$")
_NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_target(text: str, where: str, kind: str = "budget") -> tuple[Scope | None, str]:
    """``tp/all_gather:exposed_comm_us`` -> (Scope("tp", "all_gather"), "exposed_comm_us"); ``overlap_ratio``
    -> (None, "overlap_ratio"). Raises ConfigError naming ``where`` (the whole expression) on a bad one."""
    scope = None
    metric = text.strip()
    if ":" in metric:
        scope_text, metric = (p.strip() for p in metric.split(":", 1))
        parts = scope_text.split("/")
        if len(parts) > 2 or not all(p and _NAME_RE.match(p) for p in parts):
            raise ConfigError(
                f"{kind} {where!r}: bad scope {scope_text!r}; write dimension or dimension/op, "
                "e.g. tp/all_gather:exposed_comm_us<=800"
            )
        scope = Scope(parts[0], parts[1] if len(parts) == 2 else "")
    known = RUN_METRICS if scope is None else DIM_METRICS
    if metric not in known:
        what = "whole-run" if scope is None else "dimension/op"
        hint = "" if scope is not None or metric not in DIM_METRICS else "; it needs a dimension scope, e.g. tp:"
        raise ConfigError(f"{kind} {where!r}: unknown {what} metric {metric!r}{hint}; known: {', '.join(known)}")
    return scope, metric


def _parse_value(text: str, metric: str, where: str) -> float:
    text = text.strip()
    percent = text.endswith("%")
    number = text[:-1].strip() if percent else text
    if not _NUMBER_RE.match(number):
        raise ConfigError(f"budget {where!r}: value {text!r} is not a number; write e.g. 0.15, 15% or 800")
    if not math.isfinite(float(number)):  # 1e999 reads as inf: a budget that holds nothing
        raise ConfigError(f"budget {where!r}: value {text!r} is not a finite number; write e.g. 0.15, 15% or 800")
    value = float(number)
    if percent:
        if metric not in RATIO_METRICS:
            raise ConfigError(
                f"budget {where!r}: a percentage only fits a ratio metric "
                f"({', '.join(sorted(RATIO_METRICS))}); give {metric} in its own unit"
            )
        value /= 100.0
    if metric in RATIO_METRICS and not 0.0 <= value <= 1.0:
        raise ConfigError(f"budget {where!r}: {metric} is a ratio in 0..1; {text!r} is outside it")
    return value


@dataclass(frozen=True, slots=True)
class Budget:
    """One parsed budget expression."""

    expr: str
    scope: Scope | None
    metric: str
    op: str
    limit: float

    def target(self, scope: Scope | None) -> str:
        return self.metric if scope is None else f"{scope.label}:{self.metric}"

    def evaluate(self, summary: RunMetrics) -> list[CheckResult]:
        """One CheckResult, or one per dimension/op when the scope has a ``*`` wildcard."""
        if self.scope is None or not self.scope.is_pattern:
            return [self._evaluate(summary, self.scope, self.expr)]
        scopes = self.scope.expand(summary.scopes())
        if not scopes:
            return [self._missing(summary, self.scope, self.expr)]
        return [self._evaluate(summary, s, f"{self.expr} [{s.label}]") for s in scopes]

    def _common(self, scope: Scope | None, name: str) -> dict:
        return dict(
            kind="budget", name=name, metric=self.metric, limit=self.limit, op=self.op, scope="" if scope is None else scope.label
        )

    def _missing(self, summary: RunMetrics, scope: Scope | None, name: str) -> CheckResult:
        if scope is not None and not any(scope.matches(s.dimension, s.op) for s in summary.scopes()):
            have = ", ".join(s.label for s in summary.scopes()) or "none"
            why = f"{scope.label} is not in this run (dimension/op present: {have})"
        else:
            why = f"{self.target(scope)} has no value in this run"
        return CheckResult(passed=False, message=f"budget {name} failed: {why}", **self._common(scope, name))

    def _evaluate(self, summary: RunMetrics, scope: Scope | None, name: str) -> CheckResult:
        stat = summary.stat(self.metric, scope)
        if stat is None:
            return self._missing(summary, scope, name)
        ok = _OPS[self.op](stat.median, self.limit)
        now = units.metric_stat(self.metric, stat)
        if ok:
            msg = f"budget {name}: now {now}, within {self.op} {units.metric_value(self.metric, self.limit)}"
        else:
            excess = stat.median - self.limit
            rel = f" ({units.signed_percent(excess / self.limit)})" if self.limit else ""
            side = "over" if self.op in ("<=", "<") else "under"
            limit, by = units.metric_value(self.metric, self.limit), units.metric_value(self.metric, abs(excess))
            msg = f"budget {name} failed: {self.target(scope)} now {now}, limit {self.op} {limit}, {side} by {by}{rel}"
        return CheckResult(passed=ok, message=msg, current=stat, **self._common(scope, name))


def parse_budget(expr: str) -> Budget:
    """Parse one budget expression; a bad one raises ConfigError showing it and what is wrong."""
    ops = _OP_RE.findall(expr)
    if not ops:
        raise ConfigError(f"budget {expr!r}: no comparison; write METRIC<=VALUE, e.g. exposed_comm_share<=0.15")
    if len(ops) > 1:
        raise ConfigError(f"budget {expr!r}: more than one comparison; give one budget per --budget")
    op = ops[0]
    if op not in _OPS:
        raise ConfigError(f"budget {expr!r}: operator {op!r} is not supported; use <=, <, >= or >")
    lhs, rhs = expr.split(op)
    if not lhs.strip():
        raise ConfigError(f"budget {expr!r}: no metric before {op!r}")
    scope, metric = parse_target(lhs, expr)
    return Budget(expr.strip(), scope, metric, op, _parse_value(rhs, metric, expr))


def parse_fraction(text: str, option: str = "--max-regression") -> float:
    """``10%`` or ``0.10`` -> 0.10. A bare number above 1 is ambiguous and refused."""
    t = text.strip()
    number = t[:-1].strip() if t.endswith("%") else t
    if not _NUMBER_RE.match(number) or not 0 <= float(number) < math.inf:  # 1e999 reads as inf
        raise ConfigError(f"{option} {text!r}: not a finite non-negative number; write e.g. 10% or 0.10")
    if t.endswith("%"):
        return float(number) / 100.0
    if float(number) > 1:
        raise ConfigError(
            f"{option} {text!r}: ambiguous; write {number}% for a percentage or {float(number) / 100:.2f} as a fraction"
        )
    return float(number)
