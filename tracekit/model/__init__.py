"""The core trace model: columnar event tables, trace sets, the parallel layout, and trace I/O."""

from .events import COLUMNS, SCHEMA_VERSION, EventKind, EventTable
from .layout import CpKind, Dimension, LayoutError, ParallelLayout
from .traceset import ProcessGroup, RankInfo, RunMetadata, TraceSet

__all__ = ["COLUMNS", "SCHEMA_VERSION", "CpKind", "Dimension", "EventKind", "EventTable", "LayoutError",
           "ParallelLayout", "ProcessGroup", "RankInfo", "RunMetadata", "TraceSet"]
