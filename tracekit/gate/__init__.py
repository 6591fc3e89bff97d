"""The CI gate as a library over `tracekit.summary/1` dicts: budgets, baseline comparison, diff. The CLI commands
`baseline`, `check` and `diff` and the pytest plugin are thin layers on it; its results are written by the
reporters of tracekit.reports (text, JSON, JUnit, Markdown)."""

from .budgets import Budget, parse_budget, parse_fraction
from .compare import DEFAULT_METRICS, GateOptions, MetricSpec, compare, ensure_comparable, run_gate
from .diff import DiffResult, DiffRow, diff, explain
from .metrics import RunMetrics, Scope
from .result import CheckResult, GateReport
from .source import load_summary, write_summary
from .stats import Stat

__all__ = [
    "Budget", "CheckResult", "DEFAULT_METRICS", "DiffResult", "DiffRow", "GateOptions", "GateReport",
    "MetricSpec", "RunMetrics", "Scope", "Stat", "compare", "diff", "ensure_comparable", "explain", "load_summary",
    "parse_budget", "parse_fraction", "run_gate", "write_summary",
]
