"""Where a summary comes from: a `tracekit.summary/1` JSON file (read and validated by tracekit.formats), or
traces (a directory of per-rank Kineto traces, or one trace file) that the loader reads and ``tracekit.analyze``
analyses. Only the loader reads trace files: a file is told apart by its first bytes, never parsed twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import SummaryFormatError
from ..formats import core
from ..formats.summary import read_summary, read_summary_as_written
from ..runtime.outputs import write_output
from .metrics import RunMetrics

_TRACE_SUFFIXES = (".json.gz", ".pt.trace.json", ".trace.json", ".sqlite", ".nsys-rep")  # Kineto; Nsight exports
_SNIFF_BYTES = 2**20


def _is_trace(path: Path) -> bool:
    """A Kineto trace names ``traceEvents`` near its start (after the header), an Nsight export is an SQLite
    database; a summary is neither."""
    head = core.read_bytes(path, error=SummaryFormatError, limit_read=_SNIFF_BYTES)
    return b'"traceEvents"' in head or head.startswith(b"SQLite format 3\x00")


def summary_from_traces(path: Path, window: str | None = None, options: Any = None, executor: Any = None) -> dict[str, Any]:
    """Load and analyse traces into a summary dict. The one place the gate touches the loader/analyzer. A run
    without complete steps still gives a summary (its steps marked incomplete): the gate fails it. ``options``:
    the loader's LoadOptions (limits, rules, cache), as the analysing commands take them."""
    from ..analyzers import analyze
    from ..loader.loading import load

    return analyze(load(str(path), options=options, executor=executor), window=window, allow_empty=True).to_dict()


def load_summary(
    path: str | Path, window: str | None = None, options: Any = None, executor: Any = None, as_written: bool = False
) -> RunMetrics:
    """A RunMetrics from a summary JSON file, or from traces (analysed on the fly; ``window`` as
    ``tracekit analyze --window``). A trace, even one cut short, is told apart by its first bytes. Either way
    the gate reads a validated SummaryDoc: the analysis' dict goes through the same Struct as a file.
    ``as_written``: keep the file's document as it is written too (what ``baseline`` writes back); the gate and
    ``diff`` read the typed document alone, which a baseline of 10**6 steps needs in a third of the memory."""
    p = Path(path)
    if not p.exists():
        raise SummaryFormatError(f"{p}: no such file or directory; give a trace directory or a summary JSON")
    if p.is_dir() or p.name.endswith(_TRACE_SUFFIXES) or _is_trace(p):
        return RunMetrics(summary_from_traces(p, window, options, executor), str(p))
    # a summary is a document: the document limit (TRACEKIT_MAX_DOCUMENT_BYTES, 1 GiB), or --max-trace-bytes where
    # that is lower (before, the trace limit of 8 GiB applied: a 5 GB baseline was read into ~14 GB)
    limit = min(getattr(options, "max_bytes", None) or core.DEFAULT_MAX_DOCUMENT_BYTES, core.DEFAULT_MAX_DOCUMENT_BYTES)
    if not as_written:
        return RunMetrics(read_summary(p, max_bytes=limit), str(p))
    doc, written = read_summary_as_written(p, max_bytes=limit)
    return RunMetrics(doc, str(p), written)


def write_summary(summary: RunMetrics, path: str | Path) -> None:
    """The run's summary as a baseline file: the document as it was written or analysed (one space of indent,
    keys in order, never a NaN token)."""
    write_output(path, core.dumps(summary.data, indent=1) + "\n")  # a bad path: one line, never a traceback
