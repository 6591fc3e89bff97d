"""tracekit: profiler and trace analysis for distributed transformer training."""

from .errors import ConfigError, EmptyWindowError, MissingRankError, TraceFormatError, TracekitError
from .collectors import profile
from .model import EventKind, EventTable, ProcessGroup, RankInfo, RunMetadata, TraceSet

__version__ = "0.1.0"

__all__ = [
    "ConfigError", "EmptyWindowError", "EventKind", "EventTable", "MissingRankError", "ProcessGroup", "RankInfo",
    "RunMetadata", "TraceFormatError", "TraceSet", "TracekitError", "__version__",
]
