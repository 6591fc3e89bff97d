"""The CI gate as a library over `tracekit.summary/1` dicts: budgets, baseline comparison, diff, JUnit and
Markdown writers. The CLI commands `baseline`, `check` and `diff` and the pytest plugin are thin layers on it."""

from .budgets import Budget, parse_budget, parse_fraction
from .compare import DEFAULT_METRICS, GateOptions, MetricSpec, compare, ensure_comparable, run_gate
from .diff import DiffResult, DiffRow, diff, explain
from .junit import to_junit, write_junit
from .markdown import render_markdown, write_markdown
from .result import CheckResult, GateReport
from .source import load_summary, write_summary
from .stats import Stat
from .summary import Scope, Summary

__all__ = [
    "Budget", "CheckResult", "DEFAULT_METRICS", "DiffResult", "DiffRow", "GateOptions", "GateReport",
    "MetricSpec", "Scope", "Stat", "Summary", "compare", "diff", "ensure_comparable", "explain", "load_summary",
    "parse_budget", "parse_fraction", "render_markdown", "run_gate", "to_junit", "write_junit", "write_markdown",
    "write_summary",
]
