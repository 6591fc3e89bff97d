"""tracekit: profiler and trace analysis for distributed transformer training."""

from .errors import ConfigError, EmptyWindowError, MissingRankError, TraceFormatError, TracekitError
from .model import EventKind, EventTable, ProcessGroup, RankInfo, RunMetadata, TraceSet

__version__ = "0.1.0"

from .analyzers import Summary, analyze  # noqa: E402 -- after __version__, which the summary reads

__all__ = [
    "ConfigError", "EmptyWindowError", "EventKind", "EventTable", "MissingRankError", "ProcessGroup", "RankInfo",
    "RunMetadata", "Summary", "TraceFormatError", "TraceSet", "TracekitError", "__version__", "analyze",
]
