"""The HTML report's critical-path parts, from the summary's ``critical_path`` section (``report --critical-path``):
the path of the timeline's step as a highlighted lane on the timeline (drawn by critical.js), the run's verdict and
each step's, and the what-if table (analyzers.graph.whatif_table: each dimension's comm free and at 2x bandwidth, the
slowest rank's extra host time gone) with the identity replay's error. Nothing is computed here: every number is
the section's, shown with its ``data-key`` so a test can check it against the summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import units
from .timeline_drawing import PATH_KINDS, critical_lane
from .view import Figure


def _fig(key: str, label: str, value: Any, text) -> Figure:
    return Figure(key, label, value, units.NA if value is None else text(value))


def _steps(section: Mapping) -> list[dict]:
    rows = []
    for i, s in enumerate(section.get("steps") or []):
        key = f"critical_path.steps.{i}"
        cells: list[Any] = [str(s.get("step")), _fig(f"{key}.length_us", "length", s.get("length_us"), units.duration)]
        cells += [_fig(f"{key}.by_kind.{k}", k, (s.get("by_kind") or {}).get(k), units.duration) for k in PATH_KINDS]
        rows.append({"cells": cells, "verdict": str(s.get("verdict", ""))})
    return rows


def _answers(whatif: Mapping) -> list[dict]:
    rows = []
    for i, a in enumerate(whatif.get("answers") or []):
        key = f"critical_path.whatif.answers.{i}"
        rows.append(
            {
                "cells": [
                    str(a.get("question", "")),
                    " ".join(a.get("specs") or []) or "—",
                    _fig(f"{key}.measured_us", "measured", a.get("measured_us"), units.duration),
                    _fig(f"{key}.predicted_us", "predicted", a.get("predicted_us"), units.duration),
                    _fig(f"{key}.saving_share", "saving", a.get("saving_share"), units.percent),
                ],
                "notes": [str(n) for n in a.get("notes") or []],
            }
        )
    return rows


def context(summary: Mapping) -> dict:
    """The template's ``critical`` (None without a critical_path section)."""
    section = summary.get("critical_path")
    if not section:
        return {"critical": None}
    whatif = section.get("whatif") or {}
    err = whatif.get("replay_error")
    return {
        "critical": {
            "verdict": str(section.get("verdict", "")),
            "steps": _steps(section),
            "kinds": PATH_KINDS,
            "notes": [str(n) for n in (section.get("notes") or [])] + [str(n) for n in whatif.get("notes") or []],
            "answers": _answers(whatif),
            "has_whatif": bool(whatif),
            "replay_error": _fig("critical_path.whatif.replay_error", "replay error", err, lambda v: units.compact_percent(v, 3)),
            "n_steps": whatif.get("steps"),
        }
    }


def data(summary: Mapping, timeline: Mapping, max_events: int, path: Mapping | None = None) -> dict:
    """The JSON blob's ``critical``: the lane of the timeline's step, or None. ``path``: the timeline document's
    critical path on the common clock (``Timeline.path``), which puts the lane on the rank lanes' axis."""
    steps = [r.get("step") for r in timeline.get("ranks") or [] if r.get("step") is not None]
    return {"critical": critical_lane(summary, steps[0] if steps else None, max_events, path)}


def downsample_note(lane: Mapping | None) -> str | None:
    if not lane or lane["shown"] >= lane["total"] or not lane["merge_gap_us"]:
        return None
    return (
        f"critical path lane downsampled: {lane['shown']} bars for {lane['total']} segments (bars of one kind "
        f"up to {units.micros(lane['merge_gap_us'])} apart merged); raise --max-timeline-events to draw more"
    )
