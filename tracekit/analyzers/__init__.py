"""Analyzers: TraceSet in, frozen results out. Registered explicitly in ANALYZERS."""

from __future__ import annotations

from .base import Analyzer
from .run import CommAnalyzer, CommResult, Summary, analyze

ANALYZERS: tuple[type, ...] = (CommAnalyzer,)

__all__ = ["ANALYZERS", "Analyzer", "CommAnalyzer", "CommResult", "Summary", "analyze"]
