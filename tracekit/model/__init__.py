"""The core trace model: columnar event tables, trace sets, the parallel layout, and trace I/O.

Names are imported on first use (PEP 562), so importing one submodule (the layout, say) costs only that module
and what it imports, not numpy for the event tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from .events import COLUMNS, SCHEMA_VERSION, EventKind, EventTable
    from .layout import CpKind, Dimension, LayoutError, ParallelLayout
    from .traceset import ProcessGroup, RankInfo, RunMetadata, TraceSet

_LAZY = {
    **{n: ".events" for n in ("COLUMNS", "SCHEMA_VERSION", "EventKind", "EventTable")},
    **{n: ".layout" for n in ("CpKind", "Dimension", "LayoutError", "ParallelLayout")},
    **{n: ".traceset" for n in ("ProcessGroup", "RankInfo", "RunMetadata", "TraceSet")},
}

__all__ = [
    "COLUMNS",
    "SCHEMA_VERSION",
    "CpKind",
    "Dimension",
    "EventKind",
    "EventTable",
    "LayoutError",
    "ParallelLayout",
    "ProcessGroup",
    "RankInfo",
    "RunMetadata",
    "TraceSet",
]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
