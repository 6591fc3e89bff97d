"""The HTML report's tables: one unit per column, named once in its header (``wall ms``) and every number of the
column written in it, as the terminal does (``units.column``); unknowns read ``—``.

An unknown is a value the trace did not record: ``None``, a collective's ``bytes`` of 0 (NCCL kernels without
message sizes, gloo spans without annotations: a real collective never moves 0 bytes) and the bus bandwidth of such
a collective (bytes / time of an unknown size is no bandwidth). Its cell keeps the summary's raw value in
``data-value`` and says why in ``data-unknown``, so a test can check both. A collective outside every step reads
"outside steps", never ``-1``. Nothing is computed here beyond the choice of unit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import units
from .summary_tables import LABELS, label
from .view import Figure, name_cell

UNKNOWN_BYTES = "the trace did not record this collective's size"
UNKNOWN_BUSBW = "no size recorded, so no bandwidth"
OUTSIDE_STEPS = "outside steps"
_IDS = ("rank", "step", "seq", "stream", "layer", "matched", "instances", "last_arrivals", "count", "steps", "names")
# header labels of the HTML tables beyond the terminal's (tracekit.reports.summary_tables.LABELS)
HTML_LABELS = {
    **LABELS,
    "pg_desc": "group",
    "name": "kernel",
    "last_arrivals": "last arrivals",
    "mean_lateness_us": "mean lateness",
    "total_caused_wait_us": "caused wait",
    "offset_us": "clock offset",
    "spread_us": "spread",
    "model_bytes": "model bytes",
    "measured_bytes": "measured",
    "us": "time",
    "hidden_us": "hidden",
    "share": "share",
}


@dataclass(frozen=True, slots=True)
class Table:
    """A table as the template reads it: headers (unit included), which columns are numeric, and the rows
    (``{"index": i, "cells": [Figure | Name | str], "cls": str}``)."""

    headers: tuple[str, ...]
    numeric: tuple[bool, ...]
    rows: tuple[dict, ...]

    def __bool__(self) -> bool:
        return bool(self.rows)


def unknown_reason(field: str, value: Any, row: Mapping | None = None) -> str | None:
    """Why ``value`` of ``field`` is unknown (None when it is a real figure)."""
    if value is None:
        return "not recorded"
    if field == "bytes" and value == 0:
        return UNKNOWN_BYTES
    if field.endswith(("busbw_gbps", "algbw_gbps")) and row is not None and "bytes" in row and not row.get("bytes"):
        return UNKNOWN_BUSBW
    return None


def is_number(field: str, values: Sequence[Any]) -> bool:
    if field in _IDS:
        return False
    nums = [v for v in values if v is not None]
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums) and (
        bool(nums) or units.unit_of(field) != "count"
    )


def header(field: str, unit: str) -> str:
    text = HTML_LABELS[field] if field in HTML_LABELS else label(field)
    return f"{text} {unit}" if unit else text


def column(field: str, keys: Sequence[str], values: Sequence[Any], rows: Sequence[Mapping | None] = ()) -> tuple[str, list]:
    """(header, cells) of one numeric column: Figures keyed ``keys[i]``, their text in the column's unit."""
    rows = list(rows) or [None] * len(values)
    why = [unknown_reason(field, v, r) for v, r in zip(values, rows)]
    unit, texts = units.column(field, [None if w else v for v, w in zip(values, why)])
    if all(why):  # a column without one value names no unit
        unit = ""
    cells = [
        Figure(k, field, v if isinstance(v, (int, float)) and not isinstance(v, bool) else None, t, w)
        for k, v, t, w in zip(keys, values, texts, why)
    ]
    return header(field, unit), cells


def text_cell(field: str, value: Any) -> Any:
    if field == "name":
        return name_cell(value)
    if field == "step" and isinstance(value, int) and value < 0:
        return OUTSIDE_STEPS
    if value is None:
        return units.NA
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def build(items: Sequence[Mapping], fields: Sequence[str], key_of, indices: Sequence[int] | None = None) -> Table:
    """A Table of ``items[i]`` for i in ``indices`` (all by default), the cell of field f keyed ``key_of(i, f)``."""
    idx = list(range(len(items))) if indices is None else list(indices)
    picked = [items[i] for i in idx]
    headers, numeric, columns = [], [], []
    for f in fields:
        values = [it.get(f) for it in picked]
        if is_number(f, values):
            h, cells = column(f, [key_of(i, f) for i in idx], values, picked)
            numeric.append(True)
        else:
            h, cells = header(f, ""), [text_cell(f, v) for v in values]
            numeric.append(False)
        headers.append(h)
        columns.append(cells)
    rows = tuple({"index": i, "cells": [c[j] for c in columns], "cls": ""} for j, i in enumerate(idx))
    return Table(tuple(headers), tuple(numeric), rows)


def summary_table(summary: Mapping, section: str, fields: Sequence[str], indices: Sequence[int] | None = None) -> Table:
    """Rows of the summary's list ``section``, numbers keyed ``section.i.field``."""
    return build(summary.get(section) or [], fields, lambda i, f: f"{section}.{i}.{f}", indices)


def in_column_units(rows: Sequence[dict], width: int) -> list[str]:
    """Rewrite, in place, each column of Figures in ``rows`` (dicts with ``cells``, ``width`` cells each) in one
    unit (their ``label`` is the summary field), and return the unit of each column ("" where none): a table built
    cell by cell (the single-rank breakdowns) reads as one built by :func:`build`."""
    out = []
    for j in range(width):
        figs = [r["cells"][j] for r in rows if j < len(r["cells"]) and isinstance(r["cells"][j], Figure)]
        if not figs or len(figs) < len(rows):
            out.append("")
            continue
        field = figs[0].label
        unit, texts = units.column(field, [None if f.unknown else f.value for f in figs])
        for r, t in zip(rows, texts):
            f = r["cells"][j]
            r["cells"][j] = Figure(f.key, f.label, f.value, units.NA if f.unknown else t, f.unknown)
        out.append(unit)
    return out


def heads(labels: Sequence[str], unit_of: Sequence[str]) -> list[str]:
    """Header texts: each label with its column's unit."""
    return [f"{label} {u}" if u else label for label, u in zip(labels, unit_of)]
