"""What a report shows, derived from a ``tracekit.summary/1`` dict: one place for every displayed number.

The HTML and terminal reporters both read these functions, so they show the same figures. Nothing here
measures anything: headline figures are sums and ratios of the summary's own per-rank totals, and tables
are rows of the summary picked and ordered for display. Each displayed value carries its ``key`` (a dotted
path into the summary, or ``headline.<name>``) so a test can check it against the summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET, UnsetType

from .. import units
from ..formats.contract import CORE_STEP_KEYS, exposed_comm_share
from ..formats.documents import CheckDoc, StatDoc, VerdictDoc, verdict_from_builtins

# The columns of the summary's tables that both the terminal and the HTML report show.
DIMENSION_FIELDS = (
    "dimension",
    "op",
    "count",
    "bytes",
    "comm_us",
    "hidden_comm_us",
    "exposed_comm_us",
    "wait_us",
    "transfer_us",
    "busbw_gbps",
)
STRAGGLER_FIELDS = ("rank", "last_arrivals", "instances", "mean_lateness_us", "total_caused_wait_us")
UNRECOGNISED_FIELDS = ("name", "count", "total_us", "streams")


@dataclass(frozen=True, slots=True)
class Figure:
    """One displayed number: where it comes from, its raw value and how it reads; ``unknown``: why the value is
    no figure (a size the trace did not record reads ``—``, its raw 0 kept as the value)."""

    key: str
    label: str
    value: float | int | None
    text: str
    unknown: str | None = None

    def to_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "value": self.value, "text": self.text, "unknown": self.unknown}


def figure(key: str, label: str, value: Any) -> Figure:
    return Figure(key, label, value, units.display(key.rsplit(".", 1)[-1], value))


def _ratio(num: float, den: float) -> float | None:
    return None if den <= 0 else num / den


def headline(summary: Mapping) -> list[Figure]:
    """Step time (mean over ranks and steps), exposed share of the step, overlap ratio (all ranks, all steps).

    exposed share = Σ exposed_comm_us / Σ wall_us and overlap = Σ hidden_comm_us / Σ comm_us over the ranks'
    ``totals``: the same definitions as one rank's figures, pooled over ranks.
    """
    ranks = summary.get("ranks", [])
    n_steps = sum(sum(1 for s in r.get("steps", []) if s.get("complete", True)) for r in ranks)  # as totals
    tot = {k: sum(float(r["totals"].get(k) or 0.0) for r in ranks) for k in CORE_STEP_KEYS}
    step_us = tot["wall_us"] / n_steps if n_steps else None
    return [
        figure("headline.step_us", "step time (mean)", step_us),
        figure(
            "headline.exposed_share", "exposed communication / step", exposed_comm_share(tot["exposed_comm_us"], tot["wall_us"])
        ),
        figure("headline.overlap_ratio", "overlap ratio (hidden / comm)", _ratio(tot["hidden_comm_us"], tot["comm_us"])),
        figure("headline.comm_us", "communication per step (mean)", tot["comm_us"] / n_steps if n_steps else None),
    ]


def clock_note(summary: Mapping) -> str | None:
    """How the ranks' clocks were put on one time base, in words (None for a single rank)."""
    ranks = summary.get("ranks") or []
    if len(ranks) < 2:
        return None
    offs = [o for o in summary.get("clock_offsets") or [] if o.get("method") != "reference"]
    if not offs:
        return (
            "clocks not aligned: no all-reduce-like collective matched across ranks, so cross-rank figures "
            "(wait, skew, stragglers) are not computed and each rank's times stay on its own clock"
        )
    applied = [o for o in offs if o.get("applied", True)]
    agree = [o for o in offs if not o.get("applied", True)]
    within = f"± {units.duration(max(float(o.get('spread_us') or 0.0) for o in agree))}" if agree else ""
    if not applied:  # every estimate inside its own error bound: nothing corrected, said once
        return f"clocks agree within {within} (cross-rank estimate from matched collectives); no offset applied"
    o = max(applied, key=lambda o: abs(float(o.get("offset_us") or 0.0)))
    rest = f"; the other ranks' clocks agree within {within}" if agree else ""
    return (
        f"clocks aligned to rank {min(r['rank'] for r in ranks)} by the cross-rank estimate (matched "
        f"collectives): largest correction rank {o['rank']} {units.duration(o.get('offset_us'))} "
        f"± {units.duration(o.get('spread_us'))}{rest}"
    )


def _ranks(summary: Mapping) -> list[int]:
    return sorted(r["rank"] for r in summary.get("ranks") or [])


def world_size(summary: Mapping) -> int:
    run = summary.get("run") or {}
    return int(run.get("world_size") or len(_ranks(summary)) or 0)


def loaded(summary: Mapping) -> str:
    """``rank 0 of a 64-rank run``, ``ranks 0–3 (4) of a 64-rank run``, ``4 ranks``: what was loaded, never a rank id
    read as a count."""
    ranks, world = _ranks(summary), world_size(summary)
    if not ranks:
        return "no rank"
    if world > len(ranks):
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {span(ranks)}"
        return f"{who} of a {world}-rank run"
    return "1 rank" if len(ranks) == 1 else f"{len(ranks)} ranks"


def ranks_loaded(summary: Mapping) -> str:
    """The overview's line: ``1 of 128 (rank 0)``, ``4 of 4 (0–3)``."""
    ranks, world = _ranks(summary), world_size(summary)
    return f"{len(ranks)} of {world or len(ranks)} (rank{'' if len(ranks) == 1 else 's'} {span(ranks, count=False)})"


def overview(summary: Mapping) -> list[tuple[str, str]]:
    run = summary.get("run", {})
    ranks = summary.get("ranks", [])
    steps = sorted({s["step"] for r in ranks for s in r.get("steps", [])})
    layout = run.get("layout") or {}
    versions = {"tracekit": summary.get("tracekit_version", "")}
    manifest = run.get("manifest") or {}
    for k in ("torch", "torch_version", "nccl_version", "python"):
        if k in manifest:
            versions[k] = str(manifest[k])
    return [
        ("schema", str(summary.get("schema", ""))),
        ("workload", str(run.get("workload", "") or "—")),
        ("world size", str(run.get("world_size", len(ranks)))),
        ("layout", layout_text(layout)),
        ("backend / device", f"{run.get('backend', '') or '—'} / {run.get('device_type', '') or '—'}"),
        ("ranks loaded", ranks_loaded(summary)),
        ("steps", _span(steps) + _left_out(ranks)),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v)),
    ] + [("profiler overhead", over) for over in [profiler_overhead(summary)] if over]


_AXES = ("tp", "cp", "dp", "pp", "ep")


def layout_text(layout: Mapping) -> str:
    """``tp=2 × cp=2 (ring) × dp=1, sequence parallel``: the degrees in mesh order, then what qualifies them."""
    if not layout:
        return "unknown"
    degrees = [
        f"{k}={layout[k]}" + (f" ({layout['cp_kind']})" if k == "cp" and layout.get("cp_kind") else "")
        for k in _AXES
        if k in layout
    ]
    extra = ["sequence parallel"] if layout.get("sequence_parallel") is True else []
    known = {*_AXES, "cp_kind", "sequence_parallel", "world_size"}
    extra += [f"{k}={v}" for k, v in layout.items() if k not in known]
    return ", ".join([" × ".join(degrees)] * bool(degrees) + extra) or "unknown"


def profiler_overhead(summary: Mapping) -> str | None:
    """The recorded run's profiler overhead from run.json (``tracekit run``/``tracekit.profile``): the profiled step
    against the unprofiled steps before recording. Every time in the report includes it."""
    over = ((summary.get("run") or {}).get("manifest") or {}).get("profiler_overhead") or {}
    prof, base = over.get("profiled_step_ns"), over.get("unprofiled_step_ns")
    if not (isinstance(prof, int) and isinstance(base, int) and prof > 0 and base > 0):
        return None
    n_prof, n_base = over.get("profiled_steps"), over.get("unprofiled_steps")
    calls = over.get("profiler_calls_ns")
    text = (
        f"{units.signed_percent(prof / base - 1.0)} per recorded step on rank {over.get('rank', 0)}: "
        f"{units.duration(prof / 1e3)} profiled (mean of {n_prof}) against {units.duration(base / 1e3)} unprofiled "
        f"(mean of {n_base}); the times in this report include it"
    )
    if isinstance(n_base, int) and n_base < 2:
        text += " (one unprofiled step: a rough baseline on a busy machine)"
    if isinstance(calls, int) and calls > 0:
        text += f"; {units.duration(calls / 1e3)} in the profiler's start, stop and export"
    return text


def _left_out(ranks) -> str:
    n = sum(1 for r in ranks for s in r.get("steps", []) if not s.get("complete", True))
    return f" ({n} incomplete, left out of the totals)" if n else ""


def span(xs: Sequence[int], limit: int = 6, count: bool = True) -> str:
    """Integers (ranks, steps) as runs: ``0–299 (300)``, ``0–3, 8–11 (8)``; up to ``limit`` runs are listed,
    then ``…`` and the count, so a list of 300 ranks stays one short line."""
    xs = sorted(set(xs))
    if not xs:
        return "none"
    runs: list[list[int]] = []
    for x in xs:
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    parts = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}–{b}" for a, b in runs[:limit]]
    text = ", ".join(parts) + (", …" if len(runs) > limit else "")
    return text if len(xs) <= 2 or not count else f"{text} ({len(xs)})"


_span = span


@dataclass(frozen=True, slots=True)
class Name:
    """A kernel or op name as a table shows it: the short name (:func:`tracekit.analyzers.names.short_name`), the
    whole signature as its tooltip."""

    short: str
    full: str

    def __str__(self) -> str:
        return self.short


def name_cell(full: Any) -> Name:
    from ..analyzers.names import short_name

    text = "" if full is None else str(full)
    return Name(short_name(text), text)


def table(summary: Mapping, section: str, fields: Sequence[str], rows: Sequence[int] | None = None) -> list[dict]:
    """Rows of a summary list as {"index", "cells": [Figure|Name|str]}: numbers keyed ``section.i.field``, kernel
    names short with the whole name beside (the HTML's tooltip)."""
    items = summary.get(section) or []
    out = []
    for i in range(len(items)) if rows is None else rows:
        item = items[i]
        cells = [
            name_cell(item.get(f))
            if f == "name"
            else figure(f"{section}.{i}.{f}", f, item.get(f))
            if _numeric(item.get(f), f)
            else str(item.get(f, ""))
            for f in fields
        ]
        out.append({"index": i, "cells": cells})
    return out


def _numeric(v: Any, field: str) -> bool:
    return (v is None and units.unit_of(field) != "count") or (
        isinstance(v, (int, float)) and not isinstance(v, bool) and field not in ("rank", "step", "seq", "stream")
    )


def top_exposed(summary: Mapping, n: int = 20) -> list[int]:
    """Indices of the collectives with the most exposed time (ties broken by summary order)."""
    cols = summary.get("collectives") or []
    order = sorted(range(len(cols)), key=lambda i: (-float(cols[i].get("exposed_us") or 0.0), i))
    return [i for i in order[:n] if float(cols[i].get("exposed_us") or 0.0) > 0.0] or order[:n]


def rank_totals(summary: Mapping) -> list[dict]:
    ranks = summary.get("ranks", [])
    return [
        {"rank": r["rank"], "cells": [figure(f"ranks.{i}.totals.{k}", k, r["totals"].get(k)) for k in CORE_STEP_KEYS]}
        for i, r in enumerate(ranks)
    ]


def verdict(v: VerdictDoc | Mapping | None) -> dict | None:
    """The CI verdict's rows, from `tracekit check --json` (tracekit.gate/1: each check's ``current`` and
    ``baseline`` are step statistics, budgets have ``op`` and ``limit``) or the plain documented form
    ({passed, baseline, checks: [{name, value, baseline, budget, passed, message}]}). Read from the Struct
    (formats.documents.VerdictDoc); a verdict given as dicts is validated into it first."""
    if v is None or (isinstance(v, Mapping) and not v):
        return None
    doc = v if isinstance(v, VerdictDoc) else verdict_from_builtins(v)
    return {"passed": doc.passed, "baseline": _given(doc.baseline) or "", "checks": [_check_row(c) for c in doc.checks]}


def _check_row(c: CheckDoc) -> dict:
    """A field the check does not carry (UNSET) falls back as the two forms say: the plain form's ``value`` is the
    gate form's ``current`` median, its ``budget`` text the gate form's ``op`` and ``limit``."""
    metric = _given(c.metric) or _given(c.name) or ""
    fmt = units.for_metric(metric)
    value = _median(c.current) if c.value is UNSET else c.value
    base = _median(c.baseline)
    budget, limit = _given(c.budget), _given(c.limit)
    if budget is None and limit is not None:
        budget = f"{_given(c.op) or ''} {fmt(limit)}"
    return {
        "name": _given(c.name) or metric,
        "value": fmt(value) if _is_num(value) else value,
        "baseline": fmt(base) if _is_num(base) else base,
        "budget": budget or "",
        "passed": c.passed,
        "message": _given(c.message) or "",
    }


def _given(x: Any) -> Any:
    """None for a field the document does not have (msgspec's UNSET), else the field."""
    return None if x is UNSET else x


def _median(stat: StatDoc | float | str | None | UnsetType) -> float | str | None:
    return _given(stat.median) if isinstance(stat, StatDoc) else _given(stat)


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
