"""Analyzers: TraceSet in, frozen results out. ``analyze()`` runs each analyzer of ANALYZERS, in order."""

from __future__ import annotations

import warnings
from typing import Any

from .base import Analyzer
from .memory_run import ActivationMemoryAnalyzer
from .registry import ANALYZERS, analyze
from .run import Analysis, CommAnalyzer, CommResult


def __getattr__(name: str) -> Any:
    if name == "Summary":  # the old name of Analysis
        warnings.warn("tracekit.analyzers.Summary is now Analysis", DeprecationWarning, stacklevel=2)
        return Analysis
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ANALYZERS", "ActivationMemoryAnalyzer", "Analysis", "Analyzer", "CommAnalyzer", "CommResult", "analyze"]
