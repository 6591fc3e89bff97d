"""The HTML report's single-rank breakdowns (issue #18): kernels by short name, the busy partition, idle time and
its causes, launch statistics and the memory timeline, picked from the summary's per-rank sections.

Nothing is measured here. Rows of the same short name are summed (count, total and share add up: share is total
over the same busy time); every displayed number read from the summary carries its path as ``data-key`` (the
browser tests read each back), a figure derived here (the short-name sums, the activation bytes beside the peak)
a ``data-derived`` key instead.
A section that has no meaning for a rank (a CPU-only run, a trace without [memory] events) shows the analyzer's
reason instead of zeros. The template is ``templates/breakdowns.html``; its chart script ``breakdowns.js``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from .. import units
from .html_tables import heads, in_column_units
from .view import Figure

MAX_RANKS = 4  # ranks shown; the JSON summary has them all
MAX_STEP_ROWS = 50  # rows of a per-step table (12,468 steps made a 14 MB idle table); the JSON has every step
TOP_KERNELS = 15
TOP_OUTLIERS = 10
PART_LABELS = {
    "compute": "compute only",
    "communication": "communication only",
    "memory": "memory only",
    "compute_overlapping_communication": "compute ∩ communication",
    "compute_overlapping_memory": "compute ∩ memory",
    "communication_overlapping_memory": "communication ∩ memory",
    "compute_overlapping_communication_overlapping_memory": "all three",
}
LAUNCH_FIGURES = (
    ("median_delay_us", "median launch delay"),
    ("p95_delay_us", "p95 launch delay"),
    ("p99_delay_us", "p99 launch delay"),
    ("max_delay_us", "max launch delay"),
    ("median_runtime_us", "median runtime call"),
    ("median_kernel_us", "median kernel"),
)
IDLE_FIELDS = ("wall_us", "idle_us", "host_wait_us", "dependency_wait_us", "other_us", "host_wait_share")


def fig(key: str, value: Any, field: str | None = None) -> Figure:
    """A displayed number; its unit from ``field`` (or the key's last part) as the summary names fields."""
    name = field or key.rsplit(".", 1)[-1]
    return Figure(key, name, value, units.display(name, value))


def _labelled(f: Figure, label: str) -> Figure:
    return Figure(f.key, label, f.value, f.text)


def _unavailable(section: Any) -> str | None:
    if isinstance(section, Mapping) and section.get("available") is False:
        return str(section.get("reason") or "not available for this rank")
    return None


def kernels_by_short_name(rows: list[Mapping], each_name: bool = False) -> list[dict]:
    """Rows of ``kernel_breakdown`` summed per short name, largest total first; the class when all agree.
    ``each_name``: every full name its own row (labelled with its short name), for a summary that kept each rank's
    longest kernels only (``rank_detail``), where a sum over the kept rows would not be the rank's."""
    acc: dict[str, dict] = {}
    for r in rows:
        short = str(r.get("short_name") or r.get("name"))
        a = acc.setdefault(
            str(r.get("name")) if each_name else short,
            {"label": short, "classes": set(), "count": 0, "total_us": 0.0, "share": 0.0, "names": 0},
        )
        a["classes"].add(str(r.get("class", "")))
        a["count"] += int(r.get("count") or 0)
        a["total_us"] += float(r.get("total_us") or 0.0)
        a["share"] += float(r.get("share") or 0.0)
        a["names"] += 1
    out = [
        {
            "short_name": v["label"],
            "class": next(iter(v["classes"])) if len(v["classes"]) == 1 else "mixed",
            **{f: v[f] for f in ("count", "total_us", "share", "names")},
        }
        for v in acc.values()
    ]
    return sorted(out, key=lambda r: (-r["total_us"], r["short_name"]))


def _kernels(i: int, r: Mapping, cut: bool = False) -> dict:
    kb = r.get("kernel_breakdown")
    why = _unavailable(kb) if kb is not None else "not in this summary"
    if why:
        return {"reason": why}
    rows = kernels_by_short_name(list(kb or []), each_name=cut)
    base = f"derived.ranks.{i}.kernels_by_short_name"
    shown = [
        {
            "cells": [
                x["short_name"],
                x["class"],
                fig(f"{base}.{j}.count", x["count"]),
                fig(f"{base}.{j}.total_us", x["total_us"]),
                fig(f"{base}.{j}.share", x["share"]),
            ]
        }
        for j, x in enumerate(rows[:TOP_KERNELS])
    ]
    head = heads(("short name", "class", "count", "total", "share of busy"), in_column_units(shown, 5))
    return {"rows": shown, "heads": head, "total": len(rows), "names": len(kb or []), "cut": cut}


def _busy(i: int, r: Mapping) -> dict:
    bp = r.get("busy_partition") or {}
    why = _unavailable(bp) if bp else "not in this summary"
    if why:
        return {"reason": why}
    rows = [
        {
            "cells": [
                PART_LABELS.get(p["part"], p["part"]),
                fig(f"ranks.{i}.busy_partition.parts.{j}.us", p["us"], "_us"),
                fig(f"ranks.{i}.busy_partition.parts.{j}.share", p["share"]),
            ]
        }
        for j, p in enumerate(bp["parts"])
    ]
    head = heads(("part", "time", "share"), in_column_units(rows, 3))
    return {"rows": rows, "heads": head, "busy": fig(f"ranks.{i}.busy_partition.busy_us", bp.get("busy_us"))}


def _idle(i: int, r: Mapping) -> dict:
    ib = r.get("idle_breakdown") or {}
    why = _unavailable(ib) if ib else "not in this summary"
    if why:
        return {"reason": why}
    whole = [fig(f"ranks.{i}.idle_breakdown.{f}", ib.get(f)) for f in IDLE_FIELDS]
    every = ib.get("steps") or []
    shown, note = _most(every, "idle_us", "the most idle time")
    steps = [
        {
            "step": every[j].get("step"),
            "host_bound": bool(every[j].get("host_bound")),
            "cells": [fig(f"ranks.{i}.idle_breakdown.steps.{j}.{f}", every[j].get(f)) for f in IDLE_FIELDS],
        }
        for j in shown
    ]
    unit = in_column_units([{"cells": whole}, *steps], len(IDLE_FIELDS))
    head = ["step", *heads(("wall", "idle", "host wait", "dependency wait", "other", "host-wait share"), unit), "host-bound"]
    return {
        "heads": head,
        "whole": whole,
        "host_bound": bool(ib.get("host_bound")),
        "steps": steps,
        "notes": list(ib.get("notes") or []) + ([note] if note else []),
    }


def _most(rows: list, key: str, what: str) -> tuple[list[int], str | None]:
    """The indices of the rows a per-step table shows, in step order: all of them up to MAX_STEP_ROWS, else the
    MAX_STEP_ROWS with the largest ``key`` and a note saying so."""
    if len(rows) <= MAX_STEP_ROWS:
        return list(range(len(rows))), None

    def size(j: int) -> float:
        v = rows[j].get(key)
        return float(v) if isinstance(v, (int, float)) else float("-inf")

    top = sorted(range(len(rows)), key=lambda j: (-size(j), j))[:MAX_STEP_ROWS]
    return sorted(top), (
        f"{MAX_STEP_ROWS} of {len(rows):,} steps shown: those with {what}; the JSON summary "
        "(`tracekit analyze --format json`) has every step."
    )


def _mapping(x: object) -> Mapping:
    return x if isinstance(x, Mapping) else {}


def _rows(x: object) -> list[Mapping]:
    """The mapping entries of a list from the summary's untyped launch_stats section (a hand-edited summary can
    hold null or a number where a row was: a jinja UndefinedError traceback from `report --summary`)."""
    return [row for row in x if isinstance(row, Mapping)] if isinstance(x, list) else []


def _launches(i: int, r: Mapping) -> dict:
    ls = _mapping(r.get("launch_stats"))
    why = _unavailable(ls) if ls else "not in this summary"
    if why:
        return {"reason": why}
    k = f"ranks.{i}.launch_stats"
    lb = _mapping(ls.get("launch_bound_kernels"))
    figures = [_labelled(fig(f"{k}.{f}", ls.get(f)), label) for f, label in LAUNCH_FIGURES]
    figures += [
        _labelled(fig(f"{k}.launch_bound_kernels.count", lb.get("count")), "launch-bound kernels"),
        _labelled(fig(f"{k}.launch_bound_kernels.share", lb.get("share")), "launch-bound share"),
    ]
    outliers = [
        {
            "cells": [
                str(o.get("short_name", "")),
                str(o.get("stream", "")),
                str(o.get("step", "")),
                fig(f"{k}.outliers.{j}.delay_us", o.get("delay_us")),
                fig(f"{k}.outliers.{j}.runtime_us", o.get("runtime_us")),
                fig(f"{k}.outliers.{j}.kernel_us", o.get("kernel_us")),
            ]
        }
        for j, o in enumerate(_rows(ls.get("outliers"))[:TOP_OUTLIERS])
    ]
    head = heads(("kernel", "stream", "step", "launch delay", "runtime call", "kernel"), in_column_units(outliers, 6))
    return {
        "figures": figures,
        "outliers": outliers,
        "outlier_heads": head,
        "by_short_name": [
            {"short_name": str(x.get("short_name", "")), "count": str(x.get("count", ""))}  # the template's two fields
            for x in _rows(lb.get("by_short_name"))[:5]
        ],
    }


def _memory(i: int, r: Mapping, activation: Mapping) -> dict:
    mt = r.get("memory_timeline") or {}
    why = _unavailable(mt) if mt else "not in this summary"
    if why:
        return {"reason": why}
    k = f"ranks.{i}.memory_timeline"
    devices = [
        {
            "device": d["device"],
            "cells": [
                fig(f"{k}.devices.{j}.peak_allocated_bytes", d.get("peak_allocated_bytes")),
                fig(f"{k}.devices.{j}.peak_reserved_bytes", d.get("peak_reserved_bytes")),
                str(d.get("peak_step")),
                fig(f"{k}.devices.{j}.unattributed_bytes", d.get("unattributed_bytes")),
                fig(f"{k}.devices.{j}.mismatched_totals", d.get("mismatched_totals")),
            ],
        }
        for j, d in enumerate(mt["devices"])
    ]
    every = mt.get("steps") or []
    shown, step_note = _most(every, "peak_allocated_bytes", "the highest peaks")
    steps = [
        {
            "cells": [
                str(s["step"]),
                s["device"],
                fig(f"{k}.steps.{j}.peak_allocated_bytes", s["peak_allocated_bytes"]),
                fig(f"{k}.steps.{j}.max_reserved_bytes", s.get("max_reserved_bytes")),
            ]
        }
        for j, s in ((j, every[j]) for j in shown)
    ]
    allocs = [
        {
            "cells": [
                a["device"],
                a["op"],
                a.get("top_level_op", ""),
                fig(f"{k}.top_allocators.{j}.live_bytes", a["live_bytes"]),
                fig(f"{k}.top_allocators.{j}.allocations", a.get("allocations")),
                fig(f"{k}.top_allocators.{j}.share", a.get("share")),
            ]
        }
        for j, a in enumerate(mt.get("top_allocators") or [])
    ]
    unit = in_column_units(devices, 5)
    device_heads = [
        "device",
        *heads(("peak allocated", "reserved at peak", "peak step", "before the trace", "totals ≠ Σ bytes"), unit),
    ]
    step_heads = heads(("step", "device", "peak allocated", "max reserved"), in_column_units(steps, 4))
    alloc_heads = heads(("device", "op", "top-level op", "live at peak", "allocations", "share"), in_column_units(allocs, 6))
    return {
        "devices": devices,
        "device_heads": device_heads,
        "steps": steps,
        "step_heads": step_heads,
        "allocators": allocs,
        "allocator_heads": alloc_heads,
        "notes": list(mt.get("notes") or []) + ([step_note] if step_note else []),
        "activation": _activation_beside(i, r, mt, activation),
    }


def _activation_beside(i: int, r: Mapping, mt: Mapping, activation: Mapping) -> dict | None:
    """The rank's measured activation bytes (Σ over its layers, activation_memory) beside the timeline's peak."""
    layers = [(j, x) for j, x in enumerate(activation.get("layers") or []) if x.get("rank") == r.get("rank")]
    if not layers or not mt.get("devices"):
        return None
    measured = sum(int(x.get("measured_bytes") or 0) for _, x in layers)
    model = sum(int(x.get("model_bytes") or 0) for _, x in layers)
    peak = max(int(d.get("peak_allocated_bytes") or 0) for d in mt["devices"])
    return {
        "layers": len(layers),
        "measured": fig(f"derived.ranks.{i}.activation_measured_bytes", measured),
        "model": fig(f"derived.ranks.{i}.activation_model_bytes", model),
        "peak": fig(f"derived.ranks.{i}.memory_peak_allocated_bytes", peak),
        "share": fig(f"derived.ranks.{i}.activation_share_of_peak", measured / peak if peak > 0 else None, "share"),
    }


def memory_chart(summary: Mapping, ranks: list[int]) -> list[dict]:
    """Per shown rank and device: the points, time in ms from the rank's first point."""
    out = []
    for i in ranks:
        r = summary["ranks"][i]
        mt = r.get("memory_timeline") or {}
        pts = mt.get("points") or []
        t0 = min((p["t_us"][0] for p in pts if p.get("t_us")), default=0.0)
        for p in pts:
            out.append(
                {
                    "rank": r["rank"],
                    "device": p["device"],
                    "t_ms": [(t - t0) / 1e3 for t in p["t_us"]],
                    "allocated_bytes": p["allocated_bytes"],
                    "reserved_bytes": p["reserved_bytes"],
                }
            )
    return out


def _guard(build, *args) -> dict:
    """The breakdown sections are free-form in the summary's Structs: one that a hand-edited or foreign summary
    gives in another shape is named on the page, never a traceback and never a made-up number."""
    try:
        return build(*args)
    except (TypeError, KeyError, AttributeError, ValueError, IndexError) as exc:
        return {
            "reason": f"this section of the summary has an unexpected shape ({type(exc).__name__}); re-create "
            "the summary with `tracekit analyze --format json`"
        }


def context(summary: Mapping) -> dict:
    """What templates/breakdowns.html reads: ``breakdowns`` (the sections per shown rank) and its chart data."""
    ranks = summary.get("ranks") or []
    shown = list(range(min(len(ranks), MAX_RANKS)))
    activation = summary.get("activation_memory") or {}
    cut = bool((summary.get("rank_detail") or {}).get("kernel_rows_omitted"))  # each rank's longest kernels only
    blocks = [
        {
            "rank": ranks[i]["rank"],
            "index": i,
            "kernels": _guard(_kernels, i, ranks[i], cut),
            "busy": _guard(_busy, i, ranks[i]),
            "idle": _guard(_idle, i, ranks[i]),
            "launches": _guard(_launches, i, ranks[i]),
            "memory": _guard(_memory, i, ranks[i], activation),
        }
        for i in shown
    ]
    for b in blocks:  # a CPU-only rank: one line for the four device breakdowns, not four equal ones
        reasons = {b[k].get("reason") for k in ("kernels", "busy", "idle", "launches")}
        b["device_reason"] = reasons.pop() if len(reasons) == 1 else None
    note = (
        f"Ranks {', '.join(str(ranks[i]['rank']) for i in shown)} of {len(ranks)} shown; the JSON summary "
        "(`tracekit analyze --format json`) has every rank."
        if len(ranks) > len(shown)
        else None
    )
    return {
        "breakdowns": {"ranks": blocks, "note": note, "top_kernels": TOP_KERNELS, "common": _common_reasons(blocks)},
        "breakdowns_data": {"memory": memory_chart(summary, shown)},
        "breakdowns_js": _script(),
    }


def _common_reasons(blocks: list[dict]) -> list[str]:
    """When no shown rank has a breakdown to show and they all say the same why (a CPU-only run without [memory]
    events, a summary written without breakdowns): those reasons, said once for the section instead of per rank."""
    whys = [(b["device_reason"], b["memory"].get("reason")) for b in blocks]
    if not whys or any(d is None or m is None for d, m in whys) or len(set(whys)) != 1:
        return []
    return list(dict.fromkeys(whys[0]))


@lru_cache(maxsize=1)
def _script() -> str:
    return (resources.files("tracekit.reports") / "templates" / "breakdowns.js").read_text(encoding="utf-8")
