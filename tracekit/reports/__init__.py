"""The output layer: every output tracekit writes is a reporter, listed once in REPORTERS.

A reporter renders one typed document to a text or binary stream (tracekit.reports.base); ``get_reporter``
picks one by ``--format`` name or by the output file's suffix, among those that render the document's type.
Units are formatted in one place (tracekit.units). Reporter modules import their heavy libraries
(rich, jinja2) only when they render.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError
from .base import Rendered, Reporter, StreamReporter
from .diff_text import DiffText
from .flight_hang import HangMarkdown, HangTable
from .flight_timing import FlightTimingMarkdown, FlightTimingTable
from .gate_error import GateError, GateErrorJUnit, GateErrorMarkdown
from .gate_text import CheckText
from .html import HtmlReporter
from .inventory import InventoryTable
from .json import JsonReporter
from .junit import JUnitReporter
from .markdown import MarkdownReporter, SummaryMarkdown
from .memory import MemoryTable
from .perfetto import PerfettoReporter
from .perfetto_merge import MergedPerfettoReporter
from .terminal import SummaryTable
from .workload import WorkloadText

# document rendered                                    format      reporter
REPORTERS: tuple[Reporter, ...] = (
    HtmlReporter(),  # tracekit.summary/1 dict  -> html     `report -o FILE.html`
    JsonReporter(),  # anything with to_dict()  -> json     every --format json, summary/baseline/verdict files
    SummaryTable(),  # tracekit.summary/1 dict  -> table    `analyze`, `demo`
    InventoryTable(),  # analyzers.comm.inventory.Inventory -> table  `info`
    MemoryTable(),  # analyzers.memory.activation_compare.ModelEstimate -> table  `memory model`
    CheckText(),  # gate.GateReport          -> text     `check`
    JUnitReporter(),  # gate.GateReport          -> junit    `check --junit FILE`
    MarkdownReporter(),  # gate.GateReport          -> markdown `check --markdown FILE`
    GateErrorJUnit(),  # reports.GateError        -> junit    `check --junit FILE` when it could not gate
    GateErrorMarkdown(),  # reports.GateError        -> markdown `check --markdown FILE` when it could not gate
    SummaryMarkdown(),  # tracekit.summary/1 dict  -> markdown `analyze --format markdown`
    DiffText(),  # gate.DiffResult          -> text     `diff`
    WorkloadText(),  # reports.workload.WorkloadDigest -> text `run`
    PerfettoReporter(),  # reports.perfetto.TraceAnnotation -> perfetto `annotate`
    MergedPerfettoReporter(),  # reports.perfetto_merge.MergedTrace -> perfetto-merged `annotate DIR`
    HangTable(),  # analyzers.flight.hang.HangReport -> table  `hang`
    HangMarkdown(),  # analyzers.flight.hang.HangReport -> markdown `hang --format markdown`
    FlightTimingTable(),  # analyzers.flight.timing_results.FlightTiming -> table  `analyze DIR` of dumps
    FlightTimingMarkdown(),  # analyzers.flight.timing_results.FlightTiming -> markdown
)


def get_reporter(format: str | None = None, out: Path | str | None = None, document: type = Mapping) -> Reporter:
    """The reporter of ``document`` (default: a ``tracekit.summary/1`` dict) named ``format`` ("html",
    "json", "table", ...), or else the one whose suffix ends ``out``."""
    for r in REPORTERS:
        if not issubclass(document, r.document):
            continue
        if (format and r.format == format) or (not format and out is not None and r.suffix and str(out).endswith(r.suffix)):
            return r
    known = ", ".join(f"{r.format} ({r.suffix})" for r in REPORTERS if r.suffix and issubclass(document, r.document))
    raise ConfigError(f"no reporter for format={format!r} out={str(out)!r}; known: {known}")


__all__ = ["REPORTERS", "GateError", "Rendered", "Reporter", "StreamReporter", "get_reporter"]
