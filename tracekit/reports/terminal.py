"""The terminal view of a summary (rich), built from the same view model as the HTML report."""

from __future__ import annotations

import io
from typing import Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import view
from .base import check_summary


def render_text(summary: Mapping, width: int = 120, top: int = 10) -> str:
    """The summary as plain text: headline, per-rank totals, by dimension and op, top exposed collectives."""
    check_summary(summary)
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False)
    for f in view.headline(summary):
        con.print(f"{escape(f.label)}: {f.text}")
    con.print(_table("per rank (totals)", ["rank", *view.STEP_KEYS],
                     [[str(r["rank"]), *(c.text for c in r["cells"])] for r in view.rank_totals(summary)]))
    dims = view.table(summary, "by_dimension", ("dimension", "op", "count", "comm_us", "hidden_comm_us", "exposed_comm_us"))
    con.print(_table("by dimension and op", ["dimension", "op", "count", "comm", "hidden", "exposed"],
                     [[_text(c) for c in r["cells"]] for r in dims]))
    fields = ("rank", "step", "dimension", "op", "name", "exposed_us", "wait_us", "transfer_us")
    cols = view.table(summary, "collectives", fields, view.top_exposed(summary, top))
    con.print(_table(f"top {top} exposed collectives", list(fields), [[_text(c) for c in r["cells"]] for r in cols]))
    for w in summary.get("warnings") or []:
        con.print(f"warning: {escape(w)}")
    return buf.getvalue()


def _text(c) -> str:
    return c.text if isinstance(c, view.Figure) else c


def _table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    t = Table(title=title, title_justify="left")
    for h in headers:
        t.add_column(h, overflow="fold")
    for r in rows:
        t.add_row(*(escape(x) for x in r))
    return t
