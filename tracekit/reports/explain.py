"""The words the reports put beside the figures: what was loaded, why a section has nothing to show, what a
dimension or a kernel name means in this run, the profiler's overhead, and how shares that overlap add up.

The terminal and the HTML read the same sentences. Nothing is measured here: every number is the summary's (or the
run manifest's, ``run.manifest``), and each sentence is only given when the summary shows its case.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import units
from .view import loaded, profiler_overhead

# profiler_overhead lives in view (its overview line; view imports nothing of this module): re-exported here
__all__ = [
    "dimension_notes",
    "gloo_reduce_scatter",
    "heatmap_reason",
    "loaded",
    "one_rank",
    "profiler_overhead",
    "share_notes",
    "stragglers_reason",
    "timeline_reason",
]


def one_rank(summary: Mapping) -> bool:
    return len(summary.get("ranks") or []) < 2


def stragglers_reason(summary: Mapping) -> str | None:
    """Why the stragglers and clock offsets have nothing to show (None when they have)."""
    if summary.get("stragglers") or any(o.get("method") != "reference" for o in summary.get("clock_offsets") or []):
        return None
    if one_rank(summary):
        return f"One rank loaded ({loaded(summary)}): stragglers and clock offsets compare ranks; load two or more."
    return (
        "No collective was matched across the ranks (no all-reduce-like collective in common), so nobody can be "
        "said to arrive last and the clocks stay as recorded."
    )


def heatmap_reason(summary: Mapping) -> str | None:
    """Why a rank × step map would say nothing (one row or one column: the per-step table has the figures)."""
    ranks = summary.get("ranks") or []
    steps = {s["step"] for r in ranks for s in r.get("steps") or []}
    if not steps:
        return "No step was found, so there is no rank × step map."
    if len(ranks) < 2 or len(steps) < 2:
        what = "one rank" if len(ranks) < 2 else "one step"
        return (
            f"{what.capitalize()} only ({len(ranks)} × {len(steps)}): a rank × step map needs more; the steps table has "
            "each figure."
        )
    return None


def timeline_reason(timeline: Mapping) -> str | None:
    if not any(r.get("intervals") for r in timeline.get("ranks") or []):
        return "No step with compute or communication intervals to draw."
    return None


def dimension_notes(summary: Mapping) -> list[str]:
    """What a dimension row means where its name could mislead: a ``dp`` group in a run whose layout says dp=1 is
    the dp × cp gradient group (every rank holding the same weights, Megatron's DATA_PARALLEL_GROUP_WITH_CP)."""
    layout = (summary.get("run") or {}).get("layout") or {}
    dims = {r.get("dimension") for r in summary.get("by_dimension") or []}
    out = []
    dp, cp = layout.get("dp"), layout.get("cp")
    if "dp" in dims and isinstance(dp, int) and isinstance(cp, int) and cp > 1:
        out.append(
            f"dp is the gradient all-reduce group: every rank that holds the same weights, dp × cp = {dp} × {cp} = "
            f"{dp * cp} ranks (as Megatron's DATA_PARALLEL_GROUP_WITH_CP), so it exists although the layout says dp={dp}."
        )
    return out


def gloo_reduce_scatter(summary: Mapping) -> str | None:
    """gloo has no reduce-scatter of its own: torch runs it as an all-reduce of the whole input, then keeps a slice,
    so its worker span is named ``gloo:all_reduce`` and moves more bytes than NCCL's reduce-scatter would."""
    rows = summary.get("collectives") or []
    if not any(c.get("op") == "reduce_scatter" and "all_reduce" in str(c.get("name") or "") for c in rows):
        return None
    return (
        "reduce_scatter rows run the gloo:all_reduce kernel: gloo has no reduce-scatter, so torch all-reduces the "
        "whole input and keeps this rank's slice. The time is real; the bytes moved are an all-reduce's, not NCCL's "
        "reduce-scatter's."
    )


def share_notes(summary: Mapping) -> list[str]:
    """How the headline's two shares read: exposed is a share of the step, overlap a share of communication, so
    both can be near 0 when there is little communication, and neither is the other's complement."""
    ranks = summary.get("ranks") or []
    tot = {
        k: sum(float(r["totals"].get(k) or 0.0) for r in ranks)
        for k in ("wall_us", "comm_us", "hidden_comm_us", "exposed_comm_us")
    }
    if tot["comm_us"] <= 0 or tot["wall_us"] <= 0:
        return []
    return [
        f"exposed is a share of step time ({units.duration(tot['exposed_comm_us'])} of {units.duration(tot['wall_us'])}); "
        f"overlap a share of communication time ({units.duration(tot['hidden_comm_us'])} of "
        f"{units.duration(tot['comm_us'])} hidden): the two need not add up to 100 %"
    ]
