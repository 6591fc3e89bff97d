"""The HTML report's steps table: each rank's steps with their figures, a step the trace does not hold whole marked
*partial* with the analyzer's reason (its figures shown, never in a total: the totals, the headline and the gate count
complete steps only). Shown when some step is partial or when the rank × step map says nothing (one rank or one
step); the JSON summary has every step."""

from __future__ import annotations

from collections.abc import Mapping

from . import explain, html_tables

MAX_ROWS = 64
STEP_FIELDS = (
    "rank",
    "step",
    "wall_us",
    "compute_us",
    "comm_us",
    "hidden_comm_us",
    "exposed_comm_us",
    "overlap_ratio",
    "idle_us",
)


def context(summary: Mapping) -> dict:
    """``table`` (None when not shown), ``partial`` (how many steps are), ``note``."""
    ranks = summary.get("ranks") or []
    cells = [(i, j, s) for i, r in enumerate(ranks) for j, s in enumerate(r.get("steps") or [])]
    partial = [c for c in cells if not c[2].get("complete", True)]
    if not cells or (not partial and explain.heatmap_reason(summary) is None):
        return {"table": None, "partial": 0, "note": None}
    picked = cells if len(cells) <= MAX_ROWS else (partial + [c for c in cells if c not in partial])[:MAX_ROWS]
    picked = sorted(picked, key=lambda c: (c[0], c[1]))
    items = [{"rank": ranks[i]["rank"], **s} for i, _, s in picked]
    keys = [f"ranks.{i}.steps.{j}" for i, j, _ in picked]
    table = html_tables.build(items, STEP_FIELDS, lambda k, f: f"{keys[k]}.{f}")
    rows = []
    for row, (_, _, s) in zip(table.rows, picked):
        done = s.get("complete", True)
        status = "complete" if done else f"partial: {s.get('partial_reason') or 'incomplete'}"
        rows.append({**row, "cells": [*row["cells"], status], "cls": "" if done else "partial"})
    note = (
        f"{len(picked)} of {len(cells):,} steps shown (the partial ones first); the JSON summary has every step."
        if len(picked) < len(cells)
        else None
    )
    table = html_tables.Table((*table.headers, "status"), (*table.numeric, False), tuple(rows))
    return {"table": table, "partial": len(partial), "note": note}
