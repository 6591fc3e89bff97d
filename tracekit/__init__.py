"""tracekit: profiler and trace analysis for distributed transformer training."""

import warnings

from ._version import __version__
from .analyzers import Analysis, analyze
from .analyzers.memory_model import MemoryConfig, activation_model
from .errors import ConfigError, EmptyWindowError, MissingRankError, TraceFormatError, TracekitError
from .loader import LoadOptions, load
from .model import CpKind, Dimension, EventKind, EventTable, ParallelLayout, ProcessGroup, RankInfo, RunMetadata, TraceSet

__all__ = [
    "Analysis", "ConfigError", "CpKind", "Dimension", "EmptyWindowError", "EventKind", "EventTable", "MemoryConfig",
    "MissingRankError", "ParallelLayout", "ProcessGroup", "RankInfo", "RunMetadata", "TraceFormatError",
    "TraceSet", "TracekitError", "__version__", "LoadOptions", "activation_memory", "activation_model", "analyze",
    "load", "profile",
]


def __getattr__(name: str):
    """``tracekit.profile`` imports torch; only when asked for (the CLI's analysis commands never need it)."""
    if name == "profile":
        from .collectors.profile import profile

        return profile
    if name == "Summary":  # the old name of Analysis, kept importable
        warnings.warn("tracekit.Summary is now tracekit.Analysis", DeprecationWarning, stacklevel=2)
        return Analysis
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")


def activation_memory(model, layers=None, **kwargs):
    """``with tracekit.activation_memory(model) as rec: ...``; see tracekit.collectors.activation (imports torch)."""
    from .collectors.activation import activation_memory as _activation_memory
    return _activation_memory(model, layers, **kwargs)
