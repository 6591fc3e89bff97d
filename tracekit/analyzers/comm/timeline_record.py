"""Where compute, hidden and exposed communication lie in time: the ``tracekit.timeline/1`` record of one
representative step per rank (the HTML report's timeline), and a rank's hidden/exposed pieces over all steps
(``tracekit annotate``'s tracks). See docs/report-inputs.md.

The record (``tracekit.timeline/1.1``) also says how to put every rank on one axis, the corrected common clock the
analysis uses (the merged trace of ``tracekit annotate DIR`` is on the same one): ``clock`` names the reference
rank and its ``baseTimeNanoseconds``; each rank carries its own ``base_ns``, its clock ``offset_ns`` (integer ns,
as the dependency graph and the merged trace round it) and ``shift_ns`` = base − offset − the reference's base,
so a rank's µs plus ``shift_ns`` / 1000 is µs on the common clock. Given the critical path, the record carries
the path of its step with segment starts already on that clock (exact: the summary's absolute µs are floats of
epoch scale, a quarter µs apart), so the report draws a segment exactly over the op it names.

Only the interval functions of ``intervals.py`` are used: K and C are built as in ``overlap.py``
(``compute_union``; C = union of COMM), hidden = C ∩ K, exposed = C \\ K, clipped to a window by intersecting
with it. Times leave this module in µs in the rank's own trace time base (the loader's absolute ns minus
``baseTimeNanoseconds``), the time base of the trace file's ``ts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...formats.contract import TIMELINE_CATEGORIES, TIMELINE_SCHEMA
from ...model.events import EventKind, EventTable
from ...model.traceset import RankInfo, TraceSet
from .. import intervals as iv
from .overlap import RankOverlap, compute_union
from .steps import StepPlan, plan_steps

CATEGORIES = TIMELINE_CATEGORIES
TIMELINE_WRITTEN = TIMELINE_SCHEMA + ".1"  # the minor revision written: adds clock, base/offset/shift, critical_path


@dataclass(frozen=True, slots=True)
class RankTimeline:
    """One rank's pieces of K (compute), C ∩ K (hidden) and C \\ K (exposed) inside ``window_ns`` (absolute)."""

    rank: int
    step: int
    window_ns: tuple[int, int]
    base_ns: int  # the trace's baseTimeNanoseconds (0 when it has none)
    compute: iv.Intervals
    hidden: iv.Intervals
    exposed: iv.Intervals

    def intervals_us(self) -> list[list]:
        """[[start_us, end_us, category], ...] in the trace's time base, sorted by start."""
        return pieces_us([(c, getattr(self, c)) for c in CATEGORIES], self.base_ns)

    def to_dict(self) -> dict:
        lo, hi = self.window_ns
        return {
            "rank": self.rank,
            "step": self.step,
            "window_us": [us(lo - self.base_ns), us(hi - self.base_ns)],
            "intervals": self.intervals_us(),
        }


def us(ns: int) -> float:
    """Integer ns -> float µs, exact to the float's resolution (``ns / 1e3`` first rounds an epoch-scale ns value
    to a multiple of 256 ns)."""
    q, r = divmod(int(ns), 1000)
    return q + r / 1e3


def pieces_us(parts, base_ns: int) -> list[list]:
    rows = [(int(s), int(e), c) for c, (ss, ee) in parts for s, e in zip(ss, ee)]
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return [[us(s - base_ns), us(e - base_ns), c] for s, e, c in rows]


def comm_union(table: EventTable, steps: np.ndarray | None = None) -> iv.Intervals:
    """C: the union of communication intervals (only those launched in ``steps`` when given)."""
    m = table.mask_kind(EventKind.COMM)
    if steps is not None:
        m &= np.isin(table["step"].astype(np.int64), steps)
    return iv.union(table["ts_ns"][m], table.end_ns[m])


def split(c: iv.Intervals, k: iv.Intervals) -> tuple[iv.Intervals, iv.Intervals]:
    """(hidden, exposed) = (C ∩ K, C \\ K)."""
    return iv.intersect(c, k), iv.subtract(c, k)


def clip(u: iv.Intervals, lo: int, hi: int) -> iv.Intervals:
    return iv.intersect(u, iv.union([lo], [hi]))


def step_timeline(table: EventTable, info: RankInfo, step: int, plan: StepPlan | None = None) -> RankTimeline:
    """The device's time inside the host window of ``step`` (the windows tile the time axis): all compute and
    all communication that runs in it, whichever step launched it (the per-step figures count by launch; see
    docs/report-inputs.md)."""
    plan = plan if plan is not None else plan_steps(table, info)
    ids, ws, we = plan.ids, plan.start, plan.host_end
    hit = np.flatnonzero(ids == step)
    if not len(hit):
        raise KeyError(f"rank {info.rank}: no step {step}")
    lo, hi = int(ws[hit[0]]), int(we[hit[0]])
    k = compute_union(table, info.device_type)
    hidden, exposed = split(comm_union(table), k)
    return RankTimeline(
        info.rank, int(step), (lo, hi), info.base_time_ns, clip(k, lo, hi), clip(hidden, lo, hi), clip(exposed, lo, hi)
    )


def comm_pieces(table: EventTable, info: RankInfo, plan: StepPlan | None = None) -> tuple[iv.Intervals, iv.Intervals]:
    """Hidden and exposed pieces over all complete steps: C is the communication the totals count (launched in
    a complete step, or everything without steps), so their lengths are the rank's summary totals whenever the
    steps' communication unions do not overlap each other."""
    plan = plan if plan is not None else plan_steps(table, info)
    ids = plan.ids[plan.complete] if len(plan) else plan.ids
    return split(comm_union(table, ids), compute_union(table, info.device_type))


def median_step(walls: Mapping[int, Sequence[float]]) -> int:
    """The representative step: the one of median mean wall time (ties by step number), given step -> the wall
    times of the ranks that ran it. Also the HTML report's pick when it draws from a summary alone."""
    order = sorted(walls, key=lambda s: (sum(walls[s]) / len(walls[s]), s))
    return order[len(order) // 2]


def representative_steps(ranks: tuple[RankOverlap, ...]) -> dict[int, int]:
    """rank -> step to draw. One step for all ranks when some step is on every rank (the one of median mean
    wall time over the ranks, so ranks line up and a straggler shows), else each rank's median-wall step."""
    walls: dict[int, list[int]] = {}
    for r in ranks:
        for s in r.complete_steps or r.steps:
            if s.step is not None:
                walls.setdefault(s.step, []).append(s.host_wall_ns or s.wall_ns)
    common = {s: w for s, w in walls.items() if len(w) == len(ranks)}
    if common:
        pick = median_step(common)
        return {r.rank: pick for r in ranks}
    out = {}
    for r in ranks:
        by_wall = sorted(r.complete_steps or r.steps, key=lambda s: (s.host_wall_ns or s.wall_ns, s.step or 0))
        median = by_wall[len(by_wall) // 2].step if by_wall else None
        if median is not None:
            out[r.rank] = median
    return out


def int_offsets(offsets: Sequence | None) -> dict[int, int]:
    """rank -> clock offset in integer ns, rounded as tracekit.analyzers.graph.build and ``annotate DIR`` round it."""
    return {int(o.rank): int(round(o.offset_ns)) for o in offsets or ()}


DEFAULT_TIMELINE_RANKS = 32  # ranks drawn at most: a thousand lanes are unreadable, and each costs a table read


def drawn_ranks(
    ranks: Sequence[int],
    late: Sequence[int] = (),
    waited: Mapping[int, float] | None = None,
    max_ranks: int = DEFAULT_TIMELINE_RANKS,
) -> tuple[list[int], str]:
    """The ranks a timeline draws, in rank order, and why those: every rank up to ``max_ranks``; beyond, the
    reference rank (the lowest, the clock's), then in turn the stragglers (``late``, the one that made its peers
    wait longest first) and the ranks that waited longest (``waited``: rank -> wait), then the lowest numbers."""
    ranks = sorted(ranks)
    if len(ranks) <= max_ranks:
        return ranks, ""
    most_waiting = [r for r, _ in sorted((waited or {}).items(), key=lambda kv: (-kv[1], kv[0]))]
    known = set(ranks)
    chosen = {ranks[0]: None}
    pools = [iter(late), iter(most_waiting)]
    while len(chosen) < max_ranks and pools:
        pool = pools.pop(0)
        r = next((r for r in pool if r in known and r not in chosen), None)
        if r is not None:  # an exhausted pool drops out; the other keeps its turn
            chosen[r] = None
            pools.append(pool)
    for r in ranks:
        if len(chosen) >= max_ranks:
            break
        chosen.setdefault(r, None)
    why = (
        f"{len(chosen)} of {len(ranks)} ranks drawn: rank {ranks[0]} (the clock's reference), then in turn the "
        "ranks that made their peers wait longest (stragglers) and those that waited longest"
    )
    return sorted(chosen), why


def build_timeline(
    traces: TraceSet,
    ranks: tuple[RankOverlap, ...],
    offsets: Sequence | None = None,
    critical=None,
    cross=None,
    max_ranks: int = DEFAULT_TIMELINE_RANKS,
) -> dict:
    """The ``tracekit.timeline/1.1`` record for the report. ``offsets``: the analysis' clock offsets
    (clocks.ClockOffset); ``critical``: its critical_path.CriticalPaths, or None; ``cross``: its CrossRank, which
    picks the ranks drawn when there are more than ``max_ranks`` (``drawn_ranks``)."""
    picks = representative_steps(ranks)
    late = [g.rank for g in cross.stragglers] if cross is not None else []
    drawn, why = drawn_ranks(list(picks), late, cross.wait_by_rank_ns if cross is not None else None, max_ranks)
    plans = {r.rank: r.plan for r in ranks}
    off = int_offsets(offsets)
    ref = traces.ranks[0] if traces.ranks else 0
    ref_base = (traces.info(ref).base_time_ns - off.get(ref, 0)) if traces.ranks else 0
    out = []
    for r in drawn:
        s = picks[r]
        d = step_timeline(traces.table(r), traces.info(r), s, plans.get(r)).to_dict()
        base = int(traces.info(r).base_time_ns)
        d.update(base_ns=base, offset_ns=off.get(r, 0), shift_ns=base - off.get(r, 0) - ref_base)
        out.append(d)
    clock = {"reference_rank": int(ref), "base_ns": int(ref_base)}
    doc: dict[str, Any] = {"schema": TIMELINE_WRITTEN, "clock": clock, "ranks": out}
    if why:
        doc.update(ranks_total=len(picks), selection=why)
    steps = {d["step"] for d in out}
    if critical is not None and critical.steps:
        step = out[0]["step"] if out else None
        path = next((p for p in critical.steps if p.step == step), critical.steps[0])
        doc["critical_path"] = {"step": int(path.step), "segments": [path_segment(g, ref_base) for g in path.segments]}
        if len(steps) > 1:
            doc["critical_path"]["note"] = "the ranks' representative steps differ; the path is of the first rank's"
    return doc


def path_segment(seg, base_ns: int) -> dict:
    """A critical-path segment as the summary writes it, its start in µs on the common clock (from ``base_ns``)."""
    d = seg.to_dict()
    d["start_us"] = us(seg.start_ns - base_ns)
    return d
