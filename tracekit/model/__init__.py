"""The core trace model: columnar event tables, trace sets, and trace I/O."""

from .events import COLUMNS, SCHEMA_VERSION, EventKind, EventTable
from .traceset import ProcessGroup, RankInfo, RunMetadata, TraceSet

__all__ = ["COLUMNS", "SCHEMA_VERSION", "EventKind", "EventTable", "ProcessGroup", "RankInfo", "RunMetadata",
           "TraceSet"]
