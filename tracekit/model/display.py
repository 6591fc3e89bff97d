"""Short text and HTML for notebooks: what a ``repr()`` or a Jupyter cell shows of a TraceSet, an EventTable or an
analysis result. A few lines and one small table at most: the columns and string tables stay out unless asked
(``EventTable.to_pandas()``, ``Analysis.steps_frame()``, ...). Text from a trace is escaped in the HTML."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

MAX_ROWS = 16  # rows of a notebook table; the rest is counted


def grouped(n: int) -> str:
    return f"{int(n):,}"


def ids(xs: Iterable[int], limit: int = 4) -> str:
    """Integers as runs: ``0–7``, ``0, 2, 5``, ``0–3, 8–11, …`` (at most ``limit`` runs)."""
    runs: list[list[int]] = []
    for x in sorted(set(xs)):
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    parts = [str(a) if a == b else f"{a}–{b}" for a, b in runs[:limit]]
    return ", ".join(parts) + (", …" if len(runs) > limit else "") if parts else "none"


def html_table(caption: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A small HTML table (at most MAX_ROWS rows, then a count of the rest), every cell escaped."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows[:MAX_ROWS])
    more = f"<p>… {len(rows) - MAX_ROWS} more rows</p>" if len(rows) > MAX_ROWS else ""
    return (
        f"<div><p><b>{html.escape(caption)}</b></p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}</div>"
    )
