"""The CI gate as a library over `tracekit.summary/1` dicts: budgets, baseline comparison, diff. The CLI commands
`baseline`, `check` and `diff` and the pytest plugin are thin layers on it; its results are written by the
reporters of tracekit.reports (text, JSON, JUnit, Markdown)."""

import importlib
import warnings
from typing import Any

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

# Old names, still importable (DeprecationWarning): gate.Summary is RunMetrics; the writers moved to reports.
_MOVED = {"Summary": ("tracekit.gate.metrics", "RunMetrics"), "to_junit": ("tracekit.reports.junit", "to_junit"),
          "write_junit": ("tracekit.reports.junit", "write_junit"),
          "render_markdown": ("tracekit.reports.markdown", "render_markdown"),
          "write_markdown": ("tracekit.reports.markdown", "write_markdown")}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        module, attr = _MOVED[name]
        warnings.warn(f"tracekit.gate.{name} is now {module}.{attr}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
