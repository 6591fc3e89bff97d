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
from .metrics import RunMetrics

_TRACE_SUFFIXES = (".json.gz", ".pt.trace.json", ".trace.json")


def _read_json(path: Path) -> Any:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError, EOFError) as exc:
        raise SummaryFormatError(f"{path}: not readable as JSON ({exc}); give a tracekit summary "
                                 "or a trace directory") from None


def summary_from_traces(path: Path) -> Mapping[str, Any]:
    """Load and analyse traces into a summary dict. The one place the gate touches the loader/analyzer."""
    from ..analyzers import analyze
    from ..loader.io import load

    return analyze(load(str(path))).to_dict()


def load_summary(path: str | Path) -> RunMetrics:
    """A RunMetrics from a summary JSON file, or from traces (analysed on the fly)."""
    p = Path(path)
    if not p.exists():
        raise SummaryFormatError(f"{p}: no such file or directory; give a trace directory or a summary JSON")
    if p.is_dir() or p.name.endswith(_TRACE_SUFFIXES):
        return RunMetrics(summary_from_traces(p), str(p))
    data = _read_json(p)
    if isinstance(data, Mapping) and "traceEvents" in data:
        return RunMetrics(summary_from_traces(p), str(p))
    if not isinstance(data, Mapping):
        raise SummaryFormatError(f"{p}: a JSON {type(data).__name__}, not a tracekit summary object")
    return RunMetrics(data, str(p))


def write_summary(summary: RunMetrics, path: str | Path) -> None:
    """The run's summary dict as a baseline file (the JSON reporter, one space of indent, keys in order)."""
    from ..reports.json import JsonReporter

    JsonReporter().render(summary.data, path, indent=1)
