"""Analyzers: TraceSet in, frozen results out. ``analyze()`` (registry.py) runs each analyzer of ANALYZERS, in order,
and returns the ``Analysis`` facade (analysis.py). One sub-package per sub-pipeline:

- ``comm/``: steps, overlap per rank, collective instances, cross-rank matching, clock offsets, dimensions;
- ``breakdowns/``: single-rank kernels, kernel classes, the busy partition, idle causes, launch statistics;
- ``graph/``: the dependency graph over all ranks, its critical path and what-if replay;
- ``memory/``: activation memory against the analytical model, and the memory timeline.

At the root: the interval maths (intervals.py) and array helpers (arrays.py) every sub-pipeline shares, short
kernel names (names.py), the summary dict (summary_schema.py) and the DataFrame accessors (frames.py).

Names are imported on first use (PEP 562): a reporter that needs one helper (``names.short_name``) does not
import every analyzer, and pandas with them."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from .analysis import Analysis
    from .comm.communication import CommAnalyzer, CommResult
    from .memory.activation_run import ActivationMemoryAnalyzer
    from .registry import ANALYZERS, Analyzer, analyze

_LAZY = {
    "Analyzer": ".registry",
    "ActivationMemoryAnalyzer": ".memory.activation_run",
    "ANALYZERS": ".registry",
    "analyze": ".registry",
    "Analysis": ".analysis",
    "CommAnalyzer": ".comm.communication",
    "CommResult": ".comm.communication",
}


_lazy = lazy_getattr(__name__, _LAZY, globals())


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _lazy(name)
    if name == "Summary":  # the old name of Analysis
        warnings.warn("tracekit.analyzers.Summary is now Analysis", DeprecationWarning, stacklevel=2)
        return __getattr__("Analysis")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ANALYZERS", "ActivationMemoryAnalyzer", "Analysis", "Analyzer", "CommAnalyzer", "CommResult", "analyze"]
