"""Analyzers: TraceSet in, frozen results out. ``analyze()`` runs each analyzer of ANALYZERS, in order.

Names are imported on first use (PEP 562): a reporter that needs one helper (``names.short_name``) does not
import every analyzer, and pandas with them."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from .base import Analyzer
    from .memory_run import ActivationMemoryAnalyzer
    from .registry import ANALYZERS, analyze
    from .run import Analysis, CommAnalyzer, CommResult

_LAZY = {"Analyzer": ".base", "ActivationMemoryAnalyzer": ".memory_run", "ANALYZERS": ".registry",
         "analyze": ".registry", "Analysis": ".run", "CommAnalyzer": ".run", "CommResult": ".run"}


_lazy = lazy_getattr(__name__, _LAZY, globals())


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _lazy(name)
    if name == "Summary":  # the old name of Analysis
        warnings.warn("tracekit.analyzers.Summary is now Analysis", DeprecationWarning, stacklevel=2)
        return __getattr__("Analysis")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ANALYZERS", "ActivationMemoryAnalyzer", "Analysis", "Analyzer", "CommAnalyzer", "CommResult", "analyze"]
