"""Drawing the per-rank timeline of one representative step: the record's input format checked, a fallback
built from the summary's collectives, and downsampling (the record itself: tracekit.analyzers.comm.timeline_record).

Input (``tracekit.timeline/1``; see docs/report-inputs.md), given to the HTML reporter as ``timeline=`` or
found at ``summary["timeline"]``::

    {"schema": "tracekit.timeline/1",
     "ranks": [{"rank": 0, "step": 3, "window_us": [t0, t1],
                "intervals": [[start_us, end_us, "compute" | "hidden" | "exposed"], ...]}]}

Times are µs in the rank's own trace time base. Since ``tracekit.timeline/1.1`` the document also carries
``clock`` ({"reference_rank", "base_ns"}), per rank ``base_ns``, ``offset_ns`` and ``shift_ns`` (own µs +
shift_ns / 1000 = µs on the corrected common clock, the analysis' and ``annotate DIR``'s merged trace's), and
``critical_path`` ({"step", "segments"}: the summary's segments of that step, ``start_us`` on the common clock).
Such a document is drawn on the common clock, every rank and the critical path from one origin (the earliest
window start over ranks), so a path segment sits exactly over the op it names. A 1.0 document (no clock) is
drawn as before: each rank from its own ``window_us[0]``, the path on the reference clock from its first segment,
only approximately lined up across ranks; ``Timeline.clock`` says which the page shows.
"compute" intervals are the union K of compute kernels; "hidden" = C ∩ K and "exposed" = C \\ K pieces of the
communication union C, so hidden and exposed never overlap each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from msgspec import UNSET

from ..errors import ConfigError
from ..formats.contract import TIMELINE_CATEGORIES as CATEGORIES
from ..formats.contract import TIMELINE_SCHEMA
from ..formats.core import to_builtins
from ..formats.documents import TimelineDoc, TimelineRank, timeline_from_builtins

DEFAULT_MAX_EVENTS = 20_000


@dataclass(frozen=True, slots=True)
class Timeline:
    ranks: tuple[dict, ...]  # {"rank", "step", "window_us", "intervals": {category: [[s, e], ...]}}
    source: str  # "analyzer" or "collectives"
    shown: int
    total: int
    merge_gap_us: float  # 0.0 when nothing was merged
    # {"common": True, "reference_rank", "origin_us" (on the common clock), "offsets_ns": {rank: ns}} or
    # {"common": False}: what the x axis is (the page says it)
    clock: dict
    path: dict | None = None  # the document's critical_path (1.1), start_us already from the origin
    selection: str = ""  # when the document draws some of the run's ranks: which, and why

    @property
    def downsampled(self) -> bool:
        return self.shown < self.total

    def to_dict(self) -> dict:
        return {
            "ranks": list(self.ranks),
            "source": self.source,
            "shown": self.shown,
            "total": self.total,
            "merge_gap_us": self.merge_gap_us,
            "clock": self.clock,
            "clock_text": clock_text(self.clock),
        }


def clock_text(clock: Mapping) -> str:
    """The page's line on which clock the timeline's x axis is."""
    if clock.get("common"):
        return (
            f"Time axis: µs from the step's earliest start over ranks on rank {clock['reference_rank']}'s clock; "
            "every other rank moved onto it by its estimated clock offset (the clock offsets table), as in the "
            "merged trace of `tracekit annotate DIR`. The critical path lane is on the same axis."
        )
    return (
        "Time axis: each rank's lanes in µs from its own step start, on its own clock (this timeline carries no "
        "clock offsets); the critical path lane is on the reference rank's clock from the path's start, so "
        "across ranks it lines up only approximately."
    )


def from_collectives(summary: Mapping) -> dict:
    """A stand-in timeline when the analyzer gave none: each collective of the representative step as one bar,
    coloured by the larger of its hidden and exposed parts. No compute intervals are drawn."""
    ranks = summary.get("ranks") or []
    walls: dict[int, list[float]] = {}
    for r in ranks:
        for s in r.get("steps", []):
            walls.setdefault(s["step"], []).append(float(s.get("wall_us") or 0.0))
    if not walls:
        return {"schema": TIMELINE_SCHEMA, "ranks": []}
    from ..analyzers.comm.timeline_record import drawn_ranks, median_step  # numpy and pandas for the HTML report only

    step = median_step(walls)
    late = [int(s["rank"]) for s in summary.get("stragglers") or []]
    waited = {int(r["rank"]): float(r["wait_us"]) for r in ranks if r.get("wait_us") is not None}
    drawn, why = drawn_ranks([int(r["rank"]) for r in ranks], late, waited)
    of_step: dict[int, list] = {r: [] for r in drawn}  # one pass over the rows, not one per rank
    for c in summary.get("collectives") or []:
        if c.get("step") == step and c.get("rank") in of_step:
            of_step[c["rank"]].append(c)
    out = []
    for rank in drawn:
        cols = of_step[rank]
        ivs = [
            [
                float(c["start_us"]),
                float(c["start_us"]) + float(c["dur_us"]),
                "exposed" if float(c.get("exposed_us") or 0) >= float(c.get("hidden_us") or 0) else "hidden",
            ]
            for c in cols
        ]
        t0 = min((iv[0] for iv in ivs), default=0.0)
        t1 = max((iv[1] for iv in ivs), default=0.0)
        out.append({"rank": rank, "step": step, "window_us": [t0, t1], "intervals": ivs})
    doc: dict = {"schema": TIMELINE_SCHEMA, "ranks": out}
    if why:
        doc.update(ranks_total=len(ranks), selection=why)
    return doc


def _ns(us_value: float) -> int:
    return int(round(float(us_value) * 1e3))


def merge_gap(series: list[np.ndarray], max_events: int) -> float | None:
    """The smallest gap threshold g such that merging intervals closer than or at g leaves <= max_events
    (or one interval per series, if there are more series than that); None when nothing needs merging."""
    total = sum(len(a) for a in series)
    if total <= max_events:
        return None
    gaps = np.concatenate([a[1:, 0] - a[:-1, 1] for a in series if len(a) > 1] or [np.zeros(0)])
    keep = max_events - sum(1 for a in series if len(a))  # gaps that may stay open
    gaps = np.sort(gaps)[::-1]
    if keep <= 0:  # every series collapses to one interval
        return float(gaps[0]) if len(gaps) else 0.0
    return float(gaps[keep])  # keep < len(gaps) because total > max_events


def _merge(a: np.ndarray, gap: float | None) -> np.ndarray:
    if len(a) < 2 or gap is None:
        return a
    split = np.nonzero(a[1:, 0] - a[:-1, 1] > gap)[0] + 1
    starts = np.concatenate([[0], split])
    return np.stack([a[starts, 0], np.maximum.reduceat(a[:, 1], starts)], axis=1)


def prepare(summary: Mapping, timeline: TimelineDoc | Mapping | None, max_events: int = DEFAULT_MAX_EVENTS) -> Timeline:
    """Validate (into formats.documents.TimelineDoc, whichever way the timeline came), pick the source, and
    downsample above ``max_events`` intervals by merging short gaps."""
    if max_events < 1:
        raise ConfigError(f"--max-timeline-events must be at least 1, got {max_events}")
    given = timeline if timeline is not None else summary.get("timeline")
    source = "analyzer"
    if given is None:  # the stand-in goes through the same Struct
        tl, source = timeline_from_builtins(from_collectives(summary), "the summary's collectives"), "collectives"
    else:
        tl = given if isinstance(given, TimelineDoc) else timeline_from_builtins(given)
    per_rank = []
    for r in tl.ranks:
        cats = {}
        for c in CATEGORIES:
            iv = sorted((float(s), float(e)) for s, e, k in r.intervals if k == c)
            cats[c] = np.asarray(iv, dtype=np.float64).reshape(-1, 2)
        per_rank.append((r, cats))
    series = [a for _, cats in per_rank for a in cats.values()]
    total = sum(len(a) for a in series)
    gap = merge_gap(series, max_events)
    clock_doc = None if tl.clock is UNSET else tl.clock
    origin_ns = _origin_ns(tl) if clock_doc is not None else 0
    ranks, shown = [], 0
    for r, cats in per_rank:
        window = _window(r)
        # integer ns from the origin: own µs (3 decimals) + shift, exact however far apart the ranks' bases are
        move_ns = _shift(r) - origin_ns if clock_doc is not None else -_ns((window or [0.0])[0])
        merged = {c: _merge(a, gap) for c, a in cats.items()}
        shown += sum(len(a) for a in merged.values())
        ranks.append(
            {
                "rank": r.rank,
                "step": None if r.step is UNSET else r.step,
                "window_us": window,
                "intervals": {c: _moved(a, move_ns) for c, a in merged.items()},
            }
        )
        if clock_doc is not None:
            ranks[-1]["offset_ns"] = _offset(r)
    clock: dict = {"common": False}
    path = None
    if clock_doc is not None:
        clock = {
            "common": True,
            "reference_rank": clock_doc.reference_rank,
            "origin_us": round(origin_ns / 1e3, 3),
            "offsets_ns": {str(r.rank): _offset(r) for r in tl.ranks},
        }
        if tl.critical_path is not UNSET:
            path = to_builtins(tl.critical_path)
            path["segments"] = [{**g, "start_us": (_ns(g["start_us"]) - origin_ns) / 1e3} for g in path["segments"]]
    selection = "" if tl.selection is UNSET else tl.selection
    return Timeline(tuple(ranks), source, shown, total, 0.0 if gap is None else max(gap, 0.0), clock, path, selection)


def _window(r: TimelineRank) -> list[float]:
    return [] if r.window_us is UNSET else list(r.window_us)


def _offset(r: TimelineRank) -> int:
    """The rank's clock offset in ns; a 1.1 rank without one is on the reference clock (0)."""
    return 0 if r.offset_ns is UNSET else int(r.offset_ns)


def _shift(r: TimelineRank) -> int:
    return 0 if r.shift_ns is UNSET else int(r.shift_ns)  # a 1.1 rank always has one (_checked_timeline)


def _moved(a: np.ndarray, move_ns: int) -> list:
    return ((np.round(a * 1e3).astype(np.int64) + move_ns).astype(np.float64) / 1e3).round(3).tolist()


def _origin_ns(tl: TimelineDoc) -> int:
    """The common axis' origin: the earliest window start over ranks (and path segment), in ns on the common clock."""
    starts = [_ns(w[0]) + _shift(r) for r in tl.ranks if (w := _window(r))]
    if tl.critical_path is not UNSET:
        starts += [_ns(g.start_us) for g in tl.critical_path.segments]
    return min(starts, default=0)


PATH_KINDS = ("compute", "comm_transfer", "comm_wait", "host", "memcpy", "idle")


def critical_lane(
    summary: Mapping, step: int | None, max_events: int = DEFAULT_MAX_EVENTS, path: Mapping | None = None
) -> dict | None:
    """The critical path of ``step`` (the timeline's step; the first step when it has no path) as one lane of the
    timeline, from the summary's ``critical_path`` section (``report --critical-path``): bars
    ``[start_us, dur_us, kind, rank, lane, name]``. With ``path`` (``Timeline.path``: the timeline document's
    segments of its step, already from the timeline's origin on the common clock) the bars are those, on the rank
    lanes' axis (``clock`` "common"); else from the summary's segments, from the path's start on the reference
    rank's clock (``clock`` "reference"). Above ``max_events`` segments, consecutive segments of one kind become one
    bar, and if that is still too many, bars of one kind closer than a gap are merged as the timeline's are
    (``merge_gap_us`` says how far); ``shown`` and ``total`` count bars and segments."""
    section = summary.get("critical_path") or {}
    steps = section.get("steps") or []
    if not steps:
        return None
    if path is not None and path.get("segments") and any(s.get("step") == path.get("step") for s in steps):
        step = path.get("step")
    chosen = next((s for s in steps if s.get("step") == step), steps[0])
    common = path is not None and bool(path.get("segments")) and path.get("step") == chosen.get("step")
    segments = (path or {}).get("segments") if common else chosen.get("segments")
    t0 = 0.0 if common else min((float(s["start_us"]) for s in segments or []), default=0.0)
    bars = [
        [
            float(s["start_us"]) - t0,
            float(s["dur_us"]),
            s["kind"],
            s.get("rank"),
            s.get("lane", ""),
            str(s.get("name", "")) + (f" [{s['dimension']}]" if s.get("dimension") else ""),
        ]
        for s in segments or []
        if float(s["dur_us"]) > 0
    ]
    total = len(bars)
    if total > max_events:
        bars = _runs(bars)
    gap = None
    if len(bars) > max_events:
        series = [np.asarray([[b[0], b[0] + b[1]] for b in bars if b[2] == k], np.float64).reshape(-1, 2) for k in PATH_KINDS]
        gap = merge_gap(series, max_events)
        bars = [
            [float(a), float(e - a), k, None, "", "(merged)"] for k, arr in zip(PATH_KINDS, series) for a, e in _merge(arr, gap)
        ]
    return {
        "step": chosen.get("step"),
        "verdict": chosen.get("verdict", ""),
        "length_us": chosen.get("length_us"),
        "segments": [[round(b[0], 3), round(b[1], 3), *b[2:]] for b in bars],
        "shown": len(bars),
        "total": total,
        "merge_gap_us": 0.0 if gap is None else max(gap, 0.0),
        "clock": "common" if common else "reference",
    }


def _runs(bars: list[list]) -> list[list]:
    """Consecutive bars of one kind, each touching the next, as one bar named after its first."""
    out: list[list] = []
    for b in bars:
        last = out[-1] if out else None
        if last is not None and last[2] == b[2] and abs(last[0] + last[1] - b[0]) < 1e-6:
            last[1] = b[0] + b[1] - last[0]
            if not last[5].endswith(" …"):
                last[5] += " …"
            continue
        out.append(list(b))
    return out
