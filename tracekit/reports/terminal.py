"""The terminal view of a summary (rich): `tracekit analyze --format table`. It reads the same view model as
the HTML report (tracekit.reports.view), so both show the summary's numbers with the same formatting."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from ..formats.contract import CORE_STEP_KEYS
from . import view
from .base import StreamReporter, check_summary
from .safe_text import printable
from .view import DIMENSION_FIELDS, STRAGGLER_FIELDS, UNRECOGNISED_FIELDS

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

RANK_KEYS = (*CORE_STEP_KEYS, "memcpy_us", "multi_stream_comm_us")
COLLECTIVE_FIELDS = ("rank", "step", "dimension", "op", "pg_desc", "seq", "name", "dur_us", "exposed_us", "wait_us",
                     "transfer_us", "busbw_gbps")
OFFSET_FIELDS = ("rank", "offset_us", "spread_us", "matched", "method")
MEMORY_FIELDS = ("rank", "layer", "measured_bytes", "model_bytes", "delta_bytes", "model")


def render_text(summary: Mapping, width: int = 120, top: int = 10) -> str:
    """The summary as plain text: headline, per-rank totals, by dimension and op, top exposed collectives,
    stragglers, clock offsets, unrecognised kernels, activation memory and warnings (empty sections left out)."""
    from rich.console import Console
    from rich.markup import escape

    check_summary(summary)
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False)
    for f in view.headline(summary):
        con.print(f"{escape(printable(f.label))}: {escape(printable(f.text))}")
    note = view.clock_note(summary)
    if note:
        con.print(escape(printable(note)))
    ranks = summary.get("ranks") or []
    rows = [[str(r["rank"]), str(len(r.get("steps", []))),
             *(view.figure(f"ranks.{i}.totals.{k}", k, r["totals"].get(k)).text for k in RANK_KEYS),
             view.figure(f"ranks.{i}.wait_us", "wait_us", r.get("wait_us")).text] for i, r in enumerate(ranks)]
    con.print(_table("per rank (totals over steps)", ["rank", "steps", *RANK_KEYS, "wait_us"], rows))
    sections = (
        ("by dimension and op (summed over ranks)", "by_dimension", DIMENSION_FIELDS, None),
        (f"top {top} exposed collectives", "collectives", COLLECTIVE_FIELDS, view.top_exposed(summary, top)),
        ("stragglers (who arrives last)", "stragglers", STRAGGLER_FIELDS, None),
        ("clock offsets (against the lowest rank)", "clock_offsets", OFFSET_FIELDS, None),
        ("unrecognised kernels on communication streams (a comm rule may be missing)", "unrecognised_kernels",
         UNRECOGNISED_FIELDS, None),
    )
    for title, key, fields, pick in sections:
        _section(con, summary, title, key, fields, pick)
    memory = summary.get("activation_memory") or {}
    if memory.get("layers"):
        _section(con, {"layers": memory["layers"]}, "activation memory per layer: measured vs model", "layers",
                 MEMORY_FIELDS, None)
    for w in summary.get("warnings") or []:
        con.print(f"warning: {escape(printable(w))}")
    return printable(buf.getvalue(), multiline=True)  # a second guard: nothing from a trace drives the terminal


class SummaryTable(StreamReporter):
    """`tracekit analyze` (and `tracekit demo`): the summary as terminal tables; options ``width``, ``top``."""

    format = "table"
    document = Mapping

    def check(self, doc: Any) -> None:
        check_summary(doc)

    def write(self, doc: Any, stream: IO[Any], *, width: int = 120, top: int = 10, **_: Any) -> tuple[str, ...]:
        stream.write(render_text(doc, width=width, top=top))
        return ()


def _section(con: Console, summary: Mapping, title: str, key: str, fields: Sequence[str],
             pick: list[int] | None) -> None:
    rows = view.table(summary, key, fields, pick)
    if rows:
        con.print(_table(title, list(fields), [[_text(c) for c in r["cells"]] for r in rows]))


def _text(c: view.Figure | str) -> str:
    return c.text if isinstance(c, view.Figure) else c


def _table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for h in headers:
        t.add_column(h.removesuffix("_us").replace("_", " "), overflow="fold")
    for r in rows:
        t.add_row(*(escape(printable(x)) for x in r))
    return t
