"""The self-contained HTML report: jinja2 templates (autoescape on), one JSON data blob, plotly inlined.

The page loads nothing from the network: plotly.js (its cartesian partial bundle, vendored in assets/) is inlined,
as are the page's own script and stylesheet (``--plotly cdn`` loads the same bundle from Plotly's CDN instead).
Numbers are rendered server-side from the summary (each with ``data-key``/``data-value``), one unit per table
column (html_tables); a section with nothing to show is one line saying why; charts are drawn by report.js from
the JSON blob.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import IO, TYPE_CHECKING, Any

from .. import units
from ..formats.contract import CORE_STEP_KEYS
from . import charts, explain, html_assets, html_breakdowns, html_critical, html_steps, html_tables, view
from .base import StreamReporter, check_summary
from .html_assets import template_text
from .summary_tables import group_warnings
from .timeline_drawing import DEFAULT_MAX_EVENTS, Timeline, prepare
from .view import DIMENSION_FIELDS, STRAGGLER_FIELDS, UNRECOGNISED_FIELDS

if TYPE_CHECKING:
    import jinja2

TOP_COLLECTIVES = 25
COLLECTIVE_FIELDS = (
    "rank",
    "step",
    "dimension",
    "op",
    "name",
    "bytes",
    "dur_us",
    "exposed_us",
    "hidden_us",
    "wait_us",
    "transfer_us",
    "busbw_gbps",
)
OFFSET_FIELDS = ("rank", "offset_us", "spread_us", "matched")
MEMORY_FIELDS = ("rank", "layer", "model", "measured_bytes", "model_bytes")


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("tracekit.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def json_for_script(data: Any) -> str:
    """JSON safe inside <script type="application/json">: no '<' (so no '</script>' or '<!--'), '>' or '&'."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


CRITICAL_LANE_SHARE = 4  # the critical-path lane draws at most max_events // 4 bars (5,000 by default)


def downsample_note(tl: Timeline) -> str | None:
    if not tl.downsampled:
        return None
    return (
        f"timeline downsampled: {tl.shown} of {tl.total} intervals drawn (gaps up to {units.micros(tl.merge_gap_us)} "
        f"merged); raise --max-timeline-events to draw more"
    )


def _chart_data(summary: Mapping, tl: Timeline, max_events: int) -> dict[str, Any]:
    data: dict[str, Any] = {
        "dims": charts.by_dimension(summary),
        "heatmap": charts.heatmap(summary),
        "top": charts.top_collectives(summary, TOP_COLLECTIVES),
        "stragglers": charts.stragglers(summary),
        "memory": charts.memory(summary),
        "timeline": tl.to_dict(),
    }
    # the lane's bars cost plotly several times a timeline bar each (their hover text): a quarter of the budget,
    # which draws the real traces' paths whole and merges a 1,024-rank path's (a 1,400-px lane shows no more)
    data.update(html_critical.data(summary, data["timeline"], max(1, max_events // CRITICAL_LANE_SHARE), tl.path))
    steps = sorted({r["step"] for r in tl.ranks if r.get("step") is not None})
    data["timeline"]["reading"] = (
        f"Step {', '.join(map(str, steps)) or '—'} on {len(tl.ranks)} rank{'s' if len(tl.ranks) != 1 else ''}: exposed "
        "communication (red) is where the step waits for the network; hidden communication (blue) runs under compute (grey)."
    )
    return data


def _collapsed(summary: Mapping, data: Mapping) -> dict[str, str | None]:
    """Per section, why it has nothing to draw (None: it has)."""
    return {
        "dimensions": None if summary.get("by_dimension") else "No communication was found in the traces.",
        "heatmap": explain.heatmap_reason(summary),
        "timeline": explain.timeline_reason(data["timeline"]),
        "collectives": None if summary.get("collectives") else "No collective was found in the traces.",
        "stragglers": explain.stragglers_reason(summary),
    }


def context(summary: Mapping, timeline: Mapping | None, verdict: Mapping | None, max_events: int, plotly: str = "inline") -> dict:
    tl = prepare(summary, timeline, max_events)
    notes = [n for n in [view.clock_note(summary), downsample_note(tl), tl.selection] if n]
    if tl.source == "collectives":
        notes.append(
            "timeline built from the summary's collectives only (no compute intervals were given): each "
            "bar is one collective, coloured by its larger part (hidden or exposed)"
        )
    data = _chart_data(summary, tl, max_events)
    notes += [n for n in [html_critical.downsample_note(data["critical"])] if n]
    collapsed = _collapsed(summary, data)
    data["collapsed"] = {k: v is not None for k, v in collapsed.items()}
    offsets = [i for i, o in enumerate(summary.get("clock_offsets") or []) if collapsed["stragglers"] is None]
    return {
        "summary": summary,
        "loaded": view.loaded(summary),
        "overview": view.overview(summary),
        "headline": view.headline(summary),
        "share_notes": explain.share_notes(summary),
        "rank_totals": rank_totals(summary),
        "steps": html_steps.context(summary),
        "dimensions": html_tables.summary_table(summary, "by_dimension", DIMENSION_FIELDS),
        "dimension_notes": explain.dimension_notes(summary),
        "collectives": html_tables.summary_table(
            summary, "collectives", COLLECTIVE_FIELDS, view.top_exposed(summary, TOP_COLLECTIVES)
        ),
        "collective_notes": [n for n in [explain.gloo_reduce_scatter(summary)] if n],
        "stragglers": html_tables.summary_table(summary, "stragglers", STRAGGLER_FIELDS),
        "offsets": html_tables.summary_table(summary, "clock_offsets", OFFSET_FIELDS, offsets),
        "unrecognised": html_tables.summary_table(summary, "unrecognised_kernels", UNRECOGNISED_FIELDS),
        "memory": _memory_table(summary),
        "empty": collapsed,
        "warnings": group_warnings(summary.get("warnings") or []),
        "notes": notes,
        "verdict": view.verdict(verdict),
        "data": data,
        "data_json": json_for_script(data),
        "report_js": template_text("critical.js") + template_text("report.js"),
        "report_css": template_text("report.css"),
        "max_events": max_events,
        **html_assets.plotly_context(plotly),
        **html_critical.context(summary),
    }


NO_COMPLETE_STEP = "no complete step: partial steps are left out of the totals"


def rank_totals(summary: Mapping) -> html_tables.Table:
    """Per rank, the totals over its complete steps; a rank without a complete step has no totals (— each)."""
    ranks = summary.get("ranks") or []
    items = [{"rank": r["rank"], **{k: r["totals"].get(k) for k in CORE_STEP_KEYS}} for r in ranks]
    table = html_tables.build(items, ("rank", *CORE_STEP_KEYS), lambda i, f: f"ranks.{i}.totals.{f}")
    rows = tuple(
        row if _complete_steps(r) else {**row, "cells": [row["cells"][0], *(_no_total(c) for c in row["cells"][1:])]}
        for row, r in zip(table.rows, ranks)
    )
    return html_tables.Table(table.headers, table.numeric, rows)


def _no_total(cell: Any) -> Any:
    return view.Figure(cell.key, cell.label, cell.value, units.NA, NO_COMPLETE_STEP) if isinstance(cell, view.Figure) else cell


def _complete_steps(rank: Mapping) -> int:
    return sum(1 for s in rank.get("steps") or [] if s.get("complete", True))


def _memory_table(summary: Mapping) -> html_tables.Table:
    layers = (summary.get("activation_memory") or {}).get("layers") or []
    return html_tables.build(layers, MEMORY_FIELDS, lambda i, f: f"activation_memory.layers.{i}.{f}")


class HtmlReporter(StreamReporter):
    """`tracekit report -o report.html`: the summary as one self-contained page. Options: ``timeline`` (a
    ``tracekit.timeline/1`` record), ``verdict`` (`tracekit check --json`), ``max_timeline_events``, ``plotly``
    ("inline", the default: the page opens offline; "cdn": a small page that loads plotly.js from its CDN)."""

    format = "html"
    suffix = ".html"
    document = Mapping

    def check(self, doc: Any) -> None:
        check_summary(doc)

    def write(
        self,
        doc: Any,
        stream: IO[Any],
        *,
        timeline: Mapping | None = None,
        verdict: Mapping | None = None,
        max_timeline_events: int = DEFAULT_MAX_EVENTS,
        plotly: str = "inline",
        **_: Any,
    ) -> tuple[str, ...]:
        ctx = context(doc, timeline, verdict, max_timeline_events, plotly)
        ctx.update(html_breakdowns.context(doc))  # the single-rank breakdowns (templates/breakdowns.html)
        ctx["breakdowns_json"] = json_for_script(ctx["breakdowns_data"])
        stream.write(_env().get_template("report.html").render(**ctx))
        return tuple(ctx["notes"])
