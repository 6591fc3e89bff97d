"""tracekit: profiler and trace analysis for distributed transformer training.

The public API is imported lazily (PEP 562): ``import tracekit`` and ``tracekit --help`` load none of numpy,
pandas, pyarrow, rich or jinja2, and never torch; each name below is imported when first used.
``tracekit.profile`` and ``tracekit.activation_memory`` need torch (``pip install 'tracekit[collect]'``).
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import ConfigError, EmptyWindowError, MissingRankError, TraceFormatError, TracekitError

if TYPE_CHECKING:
    from .analyzers import Analysis, analyze
    from .analyzers.memory.activation_model import MemoryConfig, activation_model
    from .collectors.profile import profile
    from .loader import LoadOptions, load
    from .model import CpKind, Dimension, EventKind, EventTable, ParallelLayout, ProcessGroup, RankInfo, RunMetadata, TraceSet

# public name -> the module that defines it
_LAZY = {
    "Analysis": "tracekit.analyzers",
    "analyze": "tracekit.analyzers",
    **{n: "tracekit.analyzers.memory.activation_model" for n in ("MemoryConfig", "activation_model")},
    "LoadOptions": "tracekit.loader",
    "load": "tracekit.loader",
    **{
        n: "tracekit.model"
        for n in (
            "CpKind",
            "Dimension",
            "EventKind",
            "EventTable",
            "ParallelLayout",
            "ProcessGroup",
            "RankInfo",
            "RunMetadata",
            "TraceSet",
        )
    },
    "profile": "tracekit.collectors.profile",
}

__all__ = [
    "Analysis",
    "ConfigError",
    "CpKind",
    "Dimension",
    "EmptyWindowError",
    "EventKind",
    "EventTable",
    "MemoryConfig",
    "MissingRankError",
    "ParallelLayout",
    "ProcessGroup",
    "RankInfo",
    "RunMetadata",
    "TraceFormatError",
    "TraceSet",
    "TracekitError",
    "__version__",
    "LoadOptions",
    "activation_memory",
    "activation_model",
    "analyze",
    "load",
    "profile",
]


def __getattr__(name: str) -> Any:
    """The public API on first use (``profile`` imports torch: a one-line error names the extra when it is missing)."""
    if name in _LAZY:
        if name == "profile":
            from .collectors.need_torch import require_torch

            require_torch("tracekit.profile")
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name == "Summary":  # the old name of Analysis, kept importable
        warnings.warn("tracekit.Summary is now tracekit.Analysis", DeprecationWarning, stacklevel=2)
        return __getattr__("Analysis")
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def activation_memory(model, layers=None, **kwargs):
    """``with tracekit.activation_memory(model) as rec: ...``; see tracekit.collectors.activation (imports torch)."""
    from .collectors.need_torch import require_torch

    require_torch("tracekit.activation_memory")
    from .collectors.activation import activation_memory as _activation_memory

    return _activation_memory(model, layers, **kwargs)
