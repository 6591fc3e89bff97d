"""The self-contained HTML report: jinja2 templates (autoescape on), one JSON data blob, plotly inlined.

The page loads nothing from the network: plotly.min.js comes from the installed plotly package and is
inlined, as are the page's own script and stylesheet. Numbers are rendered server-side from the summary
(each with ``data-key``/``data-value``); charts are drawn by report.js from the JSON blob.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import IO, TYPE_CHECKING, Any

from ..formats import units
from ..formats.contract import CORE_STEP_KEYS
from . import charts, html_breakdowns, html_critical, view
from .base import StreamReporter, check_summary
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


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js bundle that ships inside the installed ``plotly`` Python package."""
    return (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def _asset(name: str) -> str:
    return (resources.files("tracekit.reports") / "templates" / name).read_text(encoding="utf-8")


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


def downsample_note(tl: Timeline) -> str | None:
    if not tl.downsampled:
        return None
    return (
        f"timeline downsampled: {tl.shown} of {tl.total} intervals drawn (gaps up to {units.micros(tl.merge_gap_us)} "
        f"merged); raise --max-timeline-events to draw more"
    )


def context(summary: Mapping, timeline: Mapping | None, verdict: Mapping | None, max_events: int) -> dict:
    tl = prepare(summary, timeline, max_events)
    notes = [n for n in [view.clock_note(summary), downsample_note(tl), tl.selection] if n]
    if tl.source == "collectives":
        notes.append(
            "timeline built from the summary's collectives only (no compute intervals were given): each "
            "bar is one collective, coloured by its larger part (hidden or exposed)"
        )
    data: dict[str, Any] = {
        "dims": charts.by_dimension(summary),
        "heatmap": charts.heatmap(summary),
        "top": charts.top_collectives(summary, TOP_COLLECTIVES),
        "stragglers": charts.stragglers(summary),
        "memory": charts.memory(summary),
        "timeline": tl.to_dict(),
    }
    data.update(html_critical.data(summary, data["timeline"], max_events, tl.path))
    notes += [n for n in [html_critical.downsample_note(data["critical"])] if n]
    steps = sorted({r["step"] for r in tl.ranks if r.get("step") is not None})
    data["timeline"]["reading"] = (
        f"Step {', '.join(map(str, steps)) or '—'} on {len(tl.ranks)} ranks: exposed communication (red) is where "
        "the step waits for the network; hidden communication (blue) runs under compute (grey)."
    )
    return {
        "summary": summary,
        "overview": view.overview(summary),
        "headline": view.headline(summary),
        "rank_totals": view.rank_totals(summary),
        "step_keys": CORE_STEP_KEYS,
        "dimensions": view.table(summary, "by_dimension", DIMENSION_FIELDS),
        "dimension_fields": DIMENSION_FIELDS,
        "collectives": view.table(summary, "collectives", COLLECTIVE_FIELDS, view.top_exposed(summary, TOP_COLLECTIVES)),
        "collective_fields": COLLECTIVE_FIELDS,
        "stragglers": view.table(summary, "stragglers", STRAGGLER_FIELDS),
        "offsets": view.table(summary, "clock_offsets", ("rank", "offset_us", "spread_us", "matched")),
        "unrecognised": view.table(summary, "unrecognised_kernels", UNRECOGNISED_FIELDS),
        "memory": _memory_rows(summary),
        "warnings": list(summary.get("warnings") or []),
        "notes": notes,
        "verdict": view.verdict(verdict),
        "data": data,
        "data_json": json_for_script(data),
        "plotly_js": plotly_js(),
        "report_js": _asset("report.js") + _asset("critical.js"),
        "report_css": _asset("report.css"),
        "max_events": max_events,
        **html_critical.context(summary),
    }


def _memory_rows(summary: Mapping) -> list[dict]:
    layers = (summary.get("activation_memory") or {}).get("layers") or []
    return [
        {
            "cells": [
                str(x.get("rank")),
                str(x.get("layer")),
                str(x.get("model", "")),
                view.figure(f"activation_memory.layers.{i}.measured_bytes", "measured", x.get("measured_bytes")),
                view.figure(f"activation_memory.layers.{i}.model_bytes", "model", x.get("model_bytes")),
            ]
        }
        for i, x in enumerate(layers)
    ]


class HtmlReporter(StreamReporter):
    """`tracekit report -o report.html`: the summary as one self-contained page. Options: ``timeline`` (a
    ``tracekit.timeline/1`` record), ``verdict`` (`tracekit check --json`), ``max_timeline_events``."""

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
        **_: Any,
    ) -> tuple[str, ...]:
        ctx = context(doc, timeline, verdict, max_timeline_events)
        ctx.update(html_breakdowns.context(doc))  # the single-rank breakdowns (templates/breakdowns.html)
        ctx["breakdowns_json"] = json_for_script(ctx["breakdowns_data"])
        stream.write(_env().get_template("report.html").render(**ctx))
        return tuple(ctx["notes"])
