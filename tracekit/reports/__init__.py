"""Reporters: each takes a ``tracekit.summary/1`` dict and writes one file. Listed explicitly in REPORTERS."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .base import Rendered, Reporter
from .html import HtmlReporter
from .json import JsonReporter

REPORTERS: tuple[Reporter, ...] = (HtmlReporter(), JsonReporter())


def get_reporter(format: str | None = None, out: Path | str | None = None) -> Reporter:
    """The reporter for ``format`` ("html", "json"), or else for the suffix of ``out``."""
    for r in REPORTERS:
        if (format and r.format == format) or (not format and out is not None and str(out).endswith(r.suffix)):
            return r
    known = ", ".join(f"{r.format} ({r.suffix})" for r in REPORTERS)
    raise ConfigError(f"no reporter for format={format!r} out={str(out)!r}; known: {known}")


__all__ = ["REPORTERS", "Rendered", "Reporter", "get_reporter"]
