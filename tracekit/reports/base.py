"""The Reporter protocol: a reporter takes a ``tracekit.summary/1`` dict and writes one file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigError
from .view import SCHEMA


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a reporter wrote, and the notes a CLI should repeat on stderr (downsampling, degraded input)."""

    path: Path
    size_bytes: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"path": str(self.path), "size_bytes": self.size_bytes, "notes": list(self.notes)}


class Reporter(Protocol):
    format: str  # "html", "json", ...
    suffix: str  # ".html", ".json", ...

    def render(self, summary: Mapping, out: Path, **opts: Any) -> Rendered:
        """Write ``summary`` (and any format-specific inputs in ``opts``) to ``out``."""
        ...


def check_summary(summary: Mapping) -> None:
    if not isinstance(summary, Mapping) or summary.get("schema") != SCHEMA:
        got = summary.get("schema") if isinstance(summary, Mapping) else type(summary).__name__
        raise ConfigError(f"summary: schema {got!r} is not {SCHEMA!r}; produce it with `tracekit analyze --format json`")
