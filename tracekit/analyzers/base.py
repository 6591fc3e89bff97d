"""The Analyzer protocol: a name, an Options dataclass, and run(traces, options) -> a frozen result."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

from ..model.traceset import TraceSet


@runtime_checkable
class Analyzer(Protocol):
    name: ClassVar[str]
    Options: ClassVar[type]

    def run(self, traces: TraceSet, options: Any) -> Any:
        """Analyse ``traces`` and return a frozen result with ``to_dict()``."""
        ...
