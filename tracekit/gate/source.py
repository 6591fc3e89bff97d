"""Where a summary comes from: a `tracekit.summary/1` JSON file, or traces (a directory of per-rank Kineto
traces, or one trace file) that are loaded with ``tracekit.loader.io.load`` and analysed with
``tracekit.analyze``."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import SummaryFormatError
from .summary import Summary

_TRACE_SUFFIXES = (".json.gz", ".pt.trace.json", ".trace.json")


def _read_json(path: Path) -> Any:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError, EOFError) as exc:
        raise SummaryFormatError(f"{path}: not readable as JSON ({exc}); give a tracekit summary "
                                 "or a trace directory") from None


def _looks_like_trace(path: Path) -> bool:
    """A Kineto trace names ``traceEvents`` within its first few KiB (a summary never does)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            return b'"traceEvents"' in fh.read(1 << 16)
    except (OSError, EOFError):
        return False


def summary_from_traces(path: Path, window: str | None = None) -> Mapping[str, Any]:
    """Load and analyse traces into a summary dict. The one place the gate touches the loader/analyzer. A run
    without complete steps still gives a summary (its steps marked incomplete): the gate fails it."""
    from ..analyzers import analyze
    from ..loader.io import load

    return analyze(load(str(path)), window=window, allow_empty=True).to_dict()


def load_summary(path: str | Path, window: str | None = None) -> Summary:
    """A Summary from a summary JSON file, or from traces (analysed on the fly; ``window`` as
    ``tracekit analyze --window``)."""
    p = Path(path)
    if not p.exists():
        raise SummaryFormatError(f"{p}: no such file or directory; give a trace directory or a summary JSON")
    if p.is_dir() or p.name.endswith(_TRACE_SUFFIXES):
        return Summary(summary_from_traces(p, window), str(p))
    if _looks_like_trace(p):  # a trace, even one cut short (not valid JSON: the loader salvages it)
        return Summary(summary_from_traces(p, window), str(p))
    data = _read_json(p)
    if isinstance(data, Mapping) and "traceEvents" in data:
        return Summary(summary_from_traces(p, window), str(p))
    if not isinstance(data, Mapping):
        raise SummaryFormatError(f"{p}: a JSON {type(data).__name__}, not a tracekit summary object")
    return Summary(data, str(p))


def write_summary(summary: Summary, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(summary.data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
