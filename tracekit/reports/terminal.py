"""The terminal view of a summary (rich): `tracekit analyze --format table`. It lays out the tables of
tracekit.reports.summary_tables (the summary's own figures, one unit per column) to fit a width: kernel names are
cut with ``…`` and, in the compact view, the optional columns left out before any header or number could wrap.
``wide`` shows every column; ``full_names`` the whole kernel signatures (folded over lines)."""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Mapping
from typing import IO, Any

from .. import units
from . import summary_tables as st
from .base import StreamReporter, check_summary
from .safe_text import printable

DEFAULT_WIDTH = 160  # not a terminal and no $COLUMNS: a CI log or a file, read at leisure
MIN_NAME = 24  # a kernel name column is never cut below this
FULL_NAME = 60  # with full_names, a name column folds its signatures at no less than this


def console(**options: Any) -> Any:
    """A rich Console whose broken pipe is Python's BrokenPipeError, for the CLI to exit 141 on quietly: rich's
    own handler exits 1, which from `check` reads as "gate failed"."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    return _Console(**options)


def output_width(stream: Any = None, width: int | None = None) -> int:
    """The width to lay tables out at: ``width`` if given; on a terminal, its width; else ``$COLUMNS``; else
    DEFAULT_WIDTH (never rich's 80 for a pipe: CI logs are read in wide windows)."""
    if width:
        return width
    stream = stream if stream is not None else sys.stdout
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    cols = os.environ.get("COLUMNS", "")
    return int(cols) if cols.isdigit() and int(cols) > 0 else DEFAULT_WIDTH


def render_text(
    summary: Mapping, width: int = DEFAULT_WIDTH, top: int = 10, *, wide: bool = False, full_names: bool = False
) -> str:
    """The summary as plain text: headline, per-rank totals, by dimension and op, top exposed collectives,
    stragglers, clock offsets, unrecognised kernels, activation memory, the single-rank breakdowns, then the
    warnings once each, grouped (empty sections left out)."""
    from rich.console import Console
    from rich.markup import escape

    check_summary(summary)
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False, soft_wrap=False)
    for line in st.headline_lines(summary):
        con.print(escape(printable(line)))
    from .critical_tables import critical_sections

    for section in st.build(summary, top=top, wide=wide, full_names=full_names) + critical_sections(
        summary, top=top, wide=wide, full_names=full_names
    ):
        _print_section(con, section, width, wide, full_names)
    for note in st.unavailable_notes(summary.get("ranks") or []):
        con.print(escape(printable(note)))
    for w in st.group_warnings(summary.get("warnings") or []):
        con.print(f"warning: {escape(printable(w))}")
    return printable(buf.getvalue(), multiline=True)  # a second guard: nothing from a trace drives the terminal


def _print_section(con, section: st.Section, width: int, wide: bool, full_names: bool) -> None:
    from rich.markup import escape

    keep, widths, empty = fit(section, width, compact=not wide, cut_names=not full_names)
    left_out = [h for i, h in enumerate(section.headers) if i not in keep and i not in empty]
    con.print(escape(printable(section.title)))
    need = sum(widths[i] for i in keep) + 3 * len(keep) + 1
    con.width = max(width, need)  # --wide / --full-names may need more than the width: never fold a number
    con.print(_table(section, keep, widths, fold=full_names))
    con.width = width
    for note in section.notes:  # a note that explains a column left out goes with it
        if not any(h.startswith(note.split(":", 1)[0]) for h in left_out):
            con.print(escape(printable(note)))
    gone = [f"{', '.join(section.headers[i] for i in empty)} (no values)"] if empty else []
    gone += [f"{', '.join(left_out)} (at {width} columns; --wide shows them)"] if left_out else []
    if gone:
        con.print(escape(f"not shown: {'; '.join(gone)}"))


def fit(
    section: st.Section, width: int, *, compact: bool = True, cut_names: bool = True
) -> tuple[list[int], list[int], list[int]]:
    """Which columns to show and how wide each is, so that the table fits ``width``: in the compact view the
    columns without a single value go, name columns shrink (down to MIN_NAME), then the droppable columns go
    from the right. Numbers and headers are never cut. Returns (shown, widths, left out for having no values)."""
    from rich.cells import cell_len

    widths = [max([cell_len(h)] + [cell_len(printable(r[i])) for r in section.rows]) for i, h in enumerate(section.headers)]
    empty = [
        i
        for i in range(len(widths))
        if compact and section.numeric[i] and section.rows and all(r[i] == units.NA for r in section.rows)
    ]
    keep = [i for i in range(len(widths)) if i not in empty]

    def total() -> int:
        return sum(widths[i] for i in keep) + 3 * len(keep) + 1

    for i in keep:
        if section.flex[i] and total() > width:
            floor = max(MIN_NAME if cut_names else FULL_NAME, cell_len(section.headers[i]))
            widths[i] = max(floor, widths[i] - (total() - width))
    droppable = section.droppable or (False,) * len(widths)
    while compact and total() > width and any(droppable[i] for i in keep):
        keep.remove(max(i for i in keep if droppable[i]))
    for i in keep:  # what dropping freed goes back to the names
        if section.flex[i] and total() < width:
            full = max([cell_len(section.headers[i])] + [cell_len(printable(r[i])) for r in section.rows])
            widths[i] = min(full, widths[i] + width - total())
    return keep, widths, empty


def cut_name(text: str, n: int) -> str:
    """``text`` in at most ``n`` cells: leading namespaces go first (``…::notify_dispatch<8>``), since the
    function name tells kernels apart; then the end is cut with ``…``."""
    from rich.cells import cell_len, set_cell_size

    if cell_len(text) <= n:
        return text
    head = text.split("<", 1)[0]
    parts = head.split("::")
    tails = [text[len(head) :]] + (["<…>"] if "<" in text else [])
    for tail in tails:
        for k in range(len(parts)):
            shorter = ("…::" if k else "") + "::".join(parts[k:]) + tail
            if cell_len(shorter) <= n:
                return shorter
    return set_cell_size(text, n - 1) + "…"


def _table(section: st.Section, keep: list[int], widths: list[int], fold: bool):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=None)
    for i in keep:
        name_fold = fold and section.flex[i]
        t.add_column(
            escape(section.headers[i]),
            justify="right" if section.numeric[i] else "left",
            no_wrap=not name_fold,
            overflow="fold" if name_fold else "ellipsis",
            min_width=widths[i],
            max_width=widths[i],
        )
    cut = {i: distinct_cuts([printable(r[i]) for r in section.rows], widths[i]) for i in keep if section.flex[i] and not fold}
    for j, r in enumerate(section.rows):
        t.add_row(*(escape(cut[i][j] if i in cut else printable(r[i])) for i in keep))
    return t


def distinct_cuts(texts: list[str], n: int) -> list[str]:
    """Each text cut to ``n`` cells (``cut_name``); where different texts would read the same, each of them gets
    a ``#k`` suffix within the ``n`` cells (k numbers all such texts in order, so suffixed labels never meet), so
    that no two different kernels print as one name."""
    out = [cut_name(t, n) for t in texts]
    by: dict[str, set[str]] = {}
    for t, c in zip(texts, out):
        by.setdefault(c, set()).add(t)
    clash = sorted({t for group in by.values() if len(group) > 1 for t in group})
    rank = {t: k for k, t in enumerate(clash, 1)}
    for j, t in enumerate(texts):
        if t in rank:
            sfx = f" #{rank[t]}"
            out[j] = cut_name(t, max(1, n - len(sfx))) + sfx
    return out


class SummaryTable(StreamReporter):
    """`tracekit analyze` (and `tracekit demo`): the summary as terminal tables; options ``width`` (default: the
    stream's, see output_width), ``top``, ``wide``, ``full_names``."""

    format = "table"
    document = Mapping

    def check(self, doc: Any) -> None:
        check_summary(doc)

    def write(
        self,
        doc: Any,
        stream: IO[Any],
        *,
        width: int | None = None,
        top: int = 10,
        wide: bool = False,
        full_names: bool = False,
        **_: Any,
    ) -> tuple[str, ...]:
        stream.write(render_text(doc, width=output_width(stream, width), top=top, wide=wide, full_names=full_names))
        return ()
