"""The CI gate as a library over `tracekit.summary/1` dicts: budgets, baseline comparison, diff. The CLI commands
`baseline`, `check` and `diff` and the pytest plugin are thin layers on it; its results are written by the
reporters of tracekit.reports (text, JSON, JUnit, Markdown)."""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_getattr

# compare and diff are both a module and a function of it: imported now, so the name is the function, as it was
# (a later import of the module would otherwise leave the module object under that name). Both are cheap.
from .compare import DEFAULT_METRICS, GateOptions, MetricSpec, compare, ensure_comparable, run_gate
from .diff import DiffResult, DiffRow, diff, explain

if TYPE_CHECKING:
    from .budgets import Budget, parse_budget, parse_fraction
    from .metrics import RunMetrics, Scope
    from .result import CheckResult, GateReport
    from .source import load_summary, write_summary
    from .stats import Stat

# Imported on first use (PEP 562): the reporters import gate.result for its types without the rest of the gate.
_LAZY = {
    **{n: ".budgets" for n in ("Budget", "parse_budget", "parse_fraction")},
    "RunMetrics": ".metrics",
    "Scope": ".metrics",
    "CheckResult": ".result",
    "GateReport": ".result",
    "load_summary": ".source",
    "write_summary": ".source",
    "Stat": ".stats",
}

__all__ = [
    "Budget",
    "CheckResult",
    "DEFAULT_METRICS",
    "DiffResult",
    "DiffRow",
    "GateOptions",
    "GateReport",
    "MetricSpec",
    "RunMetrics",
    "Scope",
    "Stat",
    "compare",
    "diff",
    "ensure_comparable",
    "explain",
    "load_summary",
    "parse_budget",
    "parse_fraction",
    "run_gate",
    "write_summary",
]

# Old names, still importable (DeprecationWarning): gate.Summary is RunMetrics; the writers moved to reports.
_MOVED = {
    "Summary": ("tracekit.gate.metrics", "RunMetrics"),
    "to_junit": ("tracekit.reports.junit", "to_junit"),
    "write_junit": ("tracekit.reports.junit", "write_junit"),
    "render_markdown": ("tracekit.reports.markdown", "render_markdown"),
    "write_markdown": ("tracekit.reports.markdown", "write_markdown"),
}


_lazy = lazy_getattr(__name__, _LAZY, globals())


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _lazy(name)
    if name in _MOVED:
        module, attr = _MOVED[name]
        warnings.warn(f"tracekit.gate.{name} is now {module}.{attr}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
