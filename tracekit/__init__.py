"""tracekit: profiler and trace analysis for distributed transformer training."""

from .analyzers.memory_model import MemoryConfig, activation_model
from .errors import ConfigError, EmptyWindowError, MissingRankError, TraceFormatError, TracekitError
from .model import EventKind, EventTable, ProcessGroup, RankInfo, RunMetadata, TraceSet

__version__ = "0.1.0"

__all__ = [
    "MemoryConfig", "activation_memory", "activation_model", "ConfigError", "EmptyWindowError", "EventKind", "EventTable", "MissingRankError", "ProcessGroup", "RankInfo",
    "RunMetadata", "TraceFormatError", "TraceSet", "TracekitError", "__version__",
]


def activation_memory(model, layers=None, **kwargs):
    """``with tracekit.activation_memory(model) as rec: ...``; see tracekit.collectors.activation (imports torch)."""
    from .collectors.activation import activation_memory as _activation_memory
    return _activation_memory(model, layers, **kwargs)
