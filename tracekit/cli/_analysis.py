"""Shared by `report` and `annotate`: load traces and analyse them into a ``tracekit.summary/1`` dict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError, TracekitError


def summary_from_traces(paths: Sequence[str]) -> dict:
    """``tracekit.model.io.load`` then ``tracekit.analyze``; a summary dict (``to_dict()`` if a result object).

    The analyzer may add an optional ``"timeline"`` key (``tracekit.timeline/1``, docs/report-inputs.md) for the
    report's timeline and the annotated trace's hidden/exposed tracks.
    """
    try:  # the loader and analyzer land separately; import them only when used
        from ..model.io import load
        from .. import analyze
    except ImportError as exc:
        raise TracekitError(f"this tracekit build has no trace loader/analyzer yet ({exc}); "
                            "render an existing summary with --summary FILE") from exc

    result = analyze(load([Path(p) for p in paths]))
    return result.to_dict() if hasattr(result, "to_dict") else dict(result)


def read_json(path: str, what: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the {what} JSON ({exc})") from exc
