"""The tables of `tracekit analyze`, laid out once for the terminal and for Markdown.

A ``Section`` is a titled table of display strings: each numeric column holds bare numbers in one unit named in
its header (``wall ms``), kernel names are short (``analyzers.names.short_name``) unless ``full_names``, and the
columns a reader rarely needs are ``optional`` (shown with ``wide``). Unknown values (null in the summary) read
``—``: a collective whose size the trace did not record (NCCL kernels without message sizes, DeepEP, gloo spans
without annotations, a dtype of unknown size) has bytes null, and a bus bandwidth without a known group size is
null, so they read ``—``, never ``0 B`` or ``0.00``. Nothing here measures: every figure is the summary's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .. import units
from ..analyzers.names import short_name
from . import rank_rows as rank_rows_mod
from . import view

# field -> header label (the unit is added from the column's values)
LABELS = {
    "wall_us": "wall",
    "compute_us": "compute",
    "comm_us": "comm",
    "hidden_comm_us": "hidden",
    "exposed_comm_us": "exposed",
    "overlap_ratio": "overlap",
    "idle_us": "idle",
    "memcpy_us": "memcpy",
    "multi_stream_comm_us": "comm on 2+ streams",
    "wait_us": "wait",
    "transfer_us": "transfer",
    "busbw_gbps": "busbw",
    "dur_us": "dur",
    "exposed_us": "exposed",
    "pg_desc": "group",
    "name": "kernel",
    "last_arrivals": "last",
    "mean_lateness_us": "mean late",
    "total_caused_wait_us": "caused wait",
    "offset_us": "offset",
    "spread_us": "±",
    "measured_bytes": "measured",
    "model_bytes": "modelled",
    "delta_bytes": "delta",
    "total_us": "total",
    "p95_us": "p95",
    "mean_us": "mean",
    "p50_us": "p50",
    "max_us": "max",
    "share": "share",
    "host_wait_us": "host wait",
    "dependency_wait_us": "dependency",
    "other_us": "other",
    "median_delay_us": "median delay",
    "p95_delay_us": "p95 delay",
    "median_runtime_us": "median call",
    "median_kernel_us": "median kernel",
    "instances": "instances",
    "partial_reason": "why partial",
}
MULTI_STREAM_NOTE = (
    "comm on 2+ streams: time during which communication runs on two or more streams at once (counted once in comm)"
)


WIDE_ONLY = 2  # Col.level: shown with wide=True only
DROPPABLE = 1  # shown by default, left out (right to left) when the table would not fit the width


@dataclass(frozen=True, slots=True)
class Col:
    field: str
    level: int = 0  # 0: always shown; DROPPABLE; WIDE_ONLY
    name: bool = False  # a kernel name: shortened unless full_names, cut to fit the width


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]  # right-aligned
    flex: tuple[bool, ...]  # may be cut (with …) to fit a width
    droppable: tuple[bool, ...] = ()  # may be left out to fit a width (the compact view only)
    notes: tuple[str, ...] = field(default=())


RANK_COLS = (
    Col("wall_us"),
    Col("compute_us"),
    Col("comm_us"),
    Col("hidden_comm_us", WIDE_ONLY),
    Col("exposed_comm_us"),
    Col("overlap_ratio"),
    Col("idle_us", DROPPABLE),
    Col("memcpy_us", WIDE_ONLY),
    Col("multi_stream_comm_us", WIDE_ONLY),
    Col("wait_us"),
)
DIMENSION_COLS = (
    Col("dimension"),
    Col("op"),
    Col("count", DROPPABLE),
    Col("bytes"),
    Col("comm_us"),
    Col("hidden_comm_us", WIDE_ONLY),
    Col("exposed_comm_us"),
    Col("wait_us"),
    Col("transfer_us", WIDE_ONLY),
    Col("busbw_gbps", DROPPABLE),
)
COLLECTIVE_COLS = (
    Col("rank"),
    Col("step", DROPPABLE),
    Col("dimension", DROPPABLE),
    Col("op"),
    Col("pg_desc", WIDE_ONLY),
    Col("seq", WIDE_ONLY),
    Col("name", name=True),
    Col("dur_us", DROPPABLE),
    Col("exposed_us"),
    Col("wait_us"),
    Col("transfer_us", WIDE_ONLY),
    Col("busbw_gbps", DROPPABLE),
)
STRAGGLER_COLS = tuple(Col(f) for f in view.STRAGGLER_FIELDS)
STRAGGLER_COLS_NUMERIC = ("last_arrivals", "instances", "mean_lateness_us", "total_caused_wait_us")
OFFSET_COLS = (Col("rank"), Col("offset_us"), Col("spread_us"), Col("matched"), Col("method"))
UNRECOGNISED_COLS = (Col("name", name=True), Col("count"), Col("total_us"), Col("streams"))
MEMORY_COLS = (Col("rank"), Col("layer"), Col("measured_bytes"), Col("model_bytes"), Col("delta_bytes"), Col("model"))
CLASS_COLS = (
    Col("class"),
    Col("count"),
    Col("total_us"),
    Col("share"),
    Col("mean_us", WIDE_ONLY),
    Col("p50_us", WIDE_ONLY),
    Col("p95_us", DROPPABLE),
    Col("max_us", WIDE_ONLY),
)
KERNEL_COLS = (Col("short_name", name=True), Col("class", DROPPABLE), Col("count"), Col("total_us"), Col("share"))
IDLE_COLS = (
    Col("rank"),
    Col("wall_us", WIDE_ONLY),
    Col("idle_us"),
    Col("host_wait_us"),
    Col("dependency_wait_us"),
    Col("other_us"),
    Col("host_bound", DROPPABLE),
)
LAUNCH_COLS = (
    Col("rank"),
    Col("median_delay_us"),
    Col("p95_delay_us"),
    Col("median_runtime_us", WIDE_ONLY),
    Col("median_kernel_us", WIDE_ONLY),
    Col("launch_bound"),
    Col("outliers", DROPPABLE),
)
IDLE_NUMERIC = ("wall_us", "idle_us", "host_wait_us", "dependency_wait_us", "other_us")
LAUNCH_NUMERIC = ("median_delay_us", "p95_delay_us", "median_runtime_us", "median_kernel_us")
KERNELS_CUT_NOTE = "each full name its own row (the summary keeps each rank's kernels with the most device time: rank_detail)"
IDLE_NOTE = (
    "host wait: nothing was launched yet (the host is behind); dependency: launched, but waiting on another "
    "stream or a sync; host bound: steps where host wait is half the step or more"
)
LAUNCH_NOTE = (
    "delay: end of the runtime call to the kernel's start; launch bound: kernels shorter than their launch "
    "call; outliers: delays over 100 µs + calls over 50 µs"
)


def build(summary: Mapping, *, top: int = 10, wide: bool = False, full_names: bool = False) -> list[Section]:
    """Every non-empty table of the summary's terminal/Markdown view, in reading order."""
    ranks = summary.get("ranks") or []
    rank_rows = [_rank_row(r) for r in ranks]
    # the multi-stream column shows by default only where it has something to say, and then with its meaning
    multi = any(float(r["totals"].get("multi_stream_comm_us") or 0.0) > 0 for r in ranks)
    spec: list[Col] = [Col(c.field, DROPPABLE) if multi and c.field == "multi_stream_comm_us" else c for c in RANK_COLS]
    rank_rows, suffix, many = rank_rows_mod.summarised(
        rank_rows,
        [c.field for c in RANK_COLS],
        lambda r: rank_rows_mod.number(r.get("exposed_comm_us")),
        top,
        "the most exposed communication",
    )
    out = [
        _section(
            f"per rank (totals over complete steps){suffix}",
            rank_rows,
            (Col("rank"), Col("steps", DROPPABLE), *spec),
            wide,
            full_names,
            (*many, *((MULTI_STREAM_NOTE,) if wide or multi else ())),
        )
    ]
    out += partial_steps(ranks, wide, full_names)
    cols = summary.get("collectives") or []
    picked = [cols[i] for i in view.top_exposed(summary, top)]
    memory = (summary.get("activation_memory") or {}).get("layers") or []
    stragglers, s_suffix, s_notes = rank_rows_mod.summarised(
        summary.get("stragglers") or [],
        STRAGGLER_COLS_NUMERIC,
        lambda r: rank_rows_mod.number(r.get("total_caused_wait_us")),
        top,
        "the most caused wait",
    )
    offsets, o_suffix, o_notes = rank_rows_mod.summarised(
        summary.get("clock_offsets") or [],
        ("offset_us", "spread_us", "matched"),
        lambda r: abs(rank_rows_mod.number(r.get("offset_us"))),
        top,
        "the largest corrections",
    )
    from .explain import dimension_notes, gloo_reduce_scatter

    gloo = gloo_reduce_scatter(summary)
    for title, rows, table_cols, notes in (
        ("by dimension and op (summed over ranks)", summary.get("by_dimension") or [], DIMENSION_COLS, dimension_notes(summary)),
        (f"top {len(picked)} exposed collectives", picked, COLLECTIVE_COLS, [gloo] if gloo else []),
        (f"stragglers (who arrives last){s_suffix}", stragglers, STRAGGLER_COLS, s_notes),
        (f"clock offsets (against the lowest rank){o_suffix}", offsets, OFFSET_COLS, o_notes),
        (
            "unrecognised kernels on communication streams (a comm rule may be missing)",
            summary.get("unrecognised_kernels") or [],
            UNRECOGNISED_COLS,
            [],
        ),
        ("activation memory per layer: measured vs model", memory, MEMORY_COLS, []),
    ):
        if rows:
            out.append(_section(title, rows, table_cols, wide, full_names, notes))
    cut = bool((summary.get("rank_detail") or {}).get("kernel_rows_omitted"))
    out += breakdown_sections(ranks, top=top, wide=wide, full_names=full_names, cut=cut)
    return out


def _rank_row(r: Mapping) -> dict:
    """A rank's totals over its complete steps; without one, no totals at all (— each), never zeros."""
    steps = r.get("steps", [])
    done = sum(1 for s in steps if s.get("complete", True))
    totals = r["totals"] if done else {k: None for k in r["totals"]}
    return {
        "rank": r["rank"],
        "steps": f"{done}/{len(steps)}" if done < len(steps) else len(steps),
        **totals,
        "wait_us": r.get("wait_us"),
    }


PARTIAL_COLS = (Col("rank"), Col("step"), *(c for c in RANK_COLS if c.field != "wait_us"), Col("partial_reason", DROPPABLE))
MAX_PARTIAL_ROWS = 20


def partial_steps(ranks: Sequence[Mapping], wide: bool, full_names: bool) -> list[Section]:
    """The steps the trace does not hold whole, each with its figures (computed from what was kept) and why: shown
    so a truncated run can be read (`--allow-partial`), never part of a total."""
    rows = [{"rank": r["rank"], **s} for r in ranks for s in r.get("steps", []) if not s.get("complete", True)]
    if not rows:
        return []
    more = (f"{len(rows) - MAX_PARTIAL_ROWS} more partial steps in --format json",) if len(rows) > MAX_PARTIAL_ROWS else ()
    title = f"partial steps ({len(rows)}): figures from incomplete data, left out of every total"
    return [_section(title, rows[:MAX_PARTIAL_ROWS], PARTIAL_COLS, wide, full_names, more)]


def breakdown_sections(ranks: Sequence[Mapping], *, top: int, wide: bool, full_names: bool, cut: bool = False) -> list[Section]:
    """The single-rank breakdowns (docs/breakdowns.md), compact: kernels by class and by short name for the
    lowest rank with device work, then idle time by cause and launch statistics one row per rank (summarised
    beyond MAX_RANK_ROWS ranks: rank_rows.py). ``cut``: the summary kept each rank's longest kernels only
    (``rank_detail``), so kernels are listed by full name, each row its own: a sum by short name over the kept
    rows would not be the rank's."""
    gpu = [r for r in ranks if isinstance(r.get("kernel_breakdown"), list)]
    if not gpu:
        return []
    r0 = gpu[0]
    busy = (r0.get("busy_partition") or {}).get("busy_us")
    out = []
    classes = r0.get("kernel_classes") or []
    if isinstance(classes, list) and classes:
        out.append(
            _section(
                f"device time by kernel class (rank {r0['rank']}, busy {units.duration(busy)})",
                classes,
                CLASS_COLS,
                wide,
                full_names,
                overlap_note(classes),
            )
        )
    kernels = _by_short_name(r0["kernel_breakdown"], full_names or cut)[:top]
    if kernels:
        out.append(
            _section(
                f"top {len(kernels)} kernels by device time (rank {r0['rank']})",
                kernels,
                (Col("name" if full_names else "short_name", name=True), *KERNEL_COLS[1:]),
                wide,
                full_names,
                (KERNELS_CUT_NOTE,) if cut else (),
            )
        )
    idle = [_idle_row(r) for r in gpu if _available(r.get("idle_breakdown"))]
    idle, i_suffix, i_notes = rank_rows_mod.summarised(
        idle, IDLE_NUMERIC, lambda r: rank_rows_mod.number(r.get("idle_us")), top, "the most idle time"
    )
    if idle:
        out.append(_section(f"device idle time by cause{i_suffix}", idle, IDLE_COLS, wide, full_names, (IDLE_NOTE, *i_notes)))
    launches = [_launch_row(r) for r in gpu if _available(r.get("launch_stats"))]
    launches, l_suffix, l_notes = rank_rows_mod.summarised(
        launches, LAUNCH_NUMERIC, lambda r: rank_rows_mod.number(r.get("p95_delay_us")), top, "the longest p95 delay"
    )
    if launches:
        out.append(_section(f"kernel launches{l_suffix}", launches, LAUNCH_COLS, wide, full_names, (LAUNCH_NOTE, *l_notes)))
    return out


def overlap_note(rows: Iterable[Mapping]) -> tuple[str, ...]:
    """When shares of busy time add up to more than 100 %, why (kernels of several streams run at the same time,
    and each counts its own time): said under the table, not left to look like an error."""
    total = sum(float(r.get("share") or 0.0) for r in rows)
    if total <= 1.0 + 1e-9:
        return ()
    return (
        f"share: of device-busy time; kernels on several streams run at once and each counts its own time, so the "
        f"shares add up to {units.percent(total)} (the busy partition splits that time without overlap: --format json)",
    )


def _available(section) -> bool:
    return isinstance(section, Mapping) and bool(section) and section.get("available", True) is not False


def unavailable_notes(ranks: Sequence[Mapping]) -> list[str]:
    """The reasons given by breakdown sections that do not apply (CPU-only runs), each once."""
    reasons = (
        s.get("reason")
        for r in ranks
        for k in ("kernel_breakdown", "idle_breakdown", "launch_stats")
        if isinstance(s := r.get(k), Mapping) and s.get("available") is False
    )
    return [f"single-rank breakdowns: {x}" for x in dict.fromkeys(x for x in reasons if x)]


def _by_short_name(rows: Iterable[Mapping], full_names: bool) -> list[dict]:
    """Kernel rows summed by short name (by full name with ``full_names``), longest total first."""
    acc: dict[str, dict] = {}
    for r in rows:
        key = str(r.get("name", "")) if full_names else str(r.get("short_name") or short_name(str(r.get("name", ""))))
        a = acc.setdefault(
            key, {"name": key, "short_name": key, "class": r.get("class", ""), "count": 0, "total_us": 0.0, "share": 0.0}
        )
        a["count"] += int(r.get("count") or 0)
        a["total_us"] += float(r.get("total_us") or 0.0)
        a["share"] += float(r.get("share") or 0.0)
    return sorted(acc.values(), key=lambda a: -a["total_us"])


def _idle_row(r: Mapping) -> dict:
    ib = r["idle_breakdown"]
    steps = ib.get("steps") or []
    bound = sum(1 for s in steps if s.get("host_bound"))
    return {
        **ib,
        "rank": r["rank"],
        "host_bound": f"{bound}/{len(steps)} steps" if steps else ("yes" if ib.get("host_bound") else "no"),
    }


def _launch_row(r: Mapping) -> dict:
    ls = r["launch_stats"]
    lb = ls.get("launch_bound_kernels") or {}
    share = lb.get("share")
    return {
        **ls,
        "rank": r["rank"],
        "launch_bound": f"{lb.get('count', 0)} ({units.percent(share)})" if share is not None else units.NA,
        "outliers": f"{ls.get('delay_outliers', 0)} + {ls.get('runtime_outliers', 0)}",
    }


def label(field: str) -> str:
    """A column's header word: LABELS', else the field without its unit suffix (the unit follows from the column's
    scale: ``length_us`` reads "length s", never "length us s")."""
    if field in LABELS:
        return LABELS[field]
    for suffix in ("_us", "_bytes", "_gbps"):
        if field.endswith(suffix) and len(field) > len(suffix):
            field = field[: -len(suffix)]
            break
    return field.replace("_", " ")


def _section(
    title: str, items: Sequence[Mapping], spec: Sequence[Col], wide: bool, full_names: bool, notes: Sequence[str] = ()
) -> Section:
    cols = [c for c in spec if wide or c.level != WIDE_ONLY]
    headers, columns, numeric = [], [], []
    for c in cols:
        values = [_value(it, c.field) for it in items]
        if _is_number_column(c.field, values):
            unit, texts = units.column(c.field, values)
            headers.append(f"{label(c.field)}{' ' + unit if unit else ''}")
            numeric.append(True)
        else:
            texts = [_text(v, c, full_names) for v in values]
            headers.append(label(c.field))
            numeric.append(False)
        columns.append(texts)
    rows = tuple(tuple(col[i] for col in columns) for i in range(len(items)))
    return Section(
        title,
        tuple(headers),
        rows,
        tuple(numeric),
        tuple(c.name for c in cols),
        tuple(c.level == DROPPABLE for c in cols),
        tuple(notes),
    )


_IDS = ("rank", "step", "seq", "stream", "layer", "matched", "instances", "last_arrivals", "count", "steps")


def _value(item: Mapping, f: str):
    return item.get(f)


def _is_number_column(f: str, values: list) -> bool:
    if f in _IDS:
        return False
    nums = [v for v in values if v is not None]
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums) and (
        bool(nums) or units.unit_of(f) != "count"
    )


def _text(v, c: Col, full_names: bool) -> str:
    if v is None:
        return units.NA
    if c.field == "step" and isinstance(v, int) and v < 0:
        return "outside steps"
    if isinstance(v, list):
        return view.span([int(x) for x in v]) if all(isinstance(x, int) for x in v) else ", ".join(map(str, v))
    if c.name and not full_names and c.field != "short_name":  # a short_name is already the summary's label
        return short_name(str(v))
    return str(v)


_SOURCE = re.compile(r"^(?:rank (?P<rank>\d+)|(?P<file>[^\s:]+\.json(?:\.gz)?)): ")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def group_warnings(warnings: Iterable[str]) -> list[str]:
    """Each warning once; warnings that differ only in their source (``rank N:`` or a trace path) and numbers
    become one line with a count and the sources: ``... (×128: ranks 0–127)``."""
    groups: dict[str, list[tuple[str, str | None]]] = {}
    for w in dict.fromkeys(warnings):
        m = _SOURCE.match(w)
        body = w[m.end() :] if m else w
        src = (m.group("rank") or m.group("file")) if m else None
        groups.setdefault(_NUMBER.sub("#", body), []).append((w, src))
    out = []
    for items in groups.values():
        if len(items) == 1:
            out.append(items[0][0])
            continue
        first = items[0][0]
        srcs = [s for _, s in items if s is not None]
        if srcs and all(s.isdigit() for s in srcs):
            who = "ranks " + view.span(sorted(int(s) for s in srcs))
        elif srcs:
            who = f"{len(srcs)} files" if len(srcs) > 3 else ", ".join(s.rsplit("/", 1)[-1] for s in srcs)
        else:
            who = "similar"
        out.append(f"{first} (×{len(items)}: {who})")
    return out


def headline_lines(summary: Mapping) -> list[str]:
    from .explain import profiler_overhead, share_notes

    lines = [f"{f.label}: {f.text}" for f in view.headline(summary)]
    lines += [f"({n})" for n in share_notes(summary)]
    over = profiler_overhead(summary)
    lines += [f"profiler overhead: {over}"] if over else []
    note = view.clock_note(summary)
    return [*lines, note] if note else lines


__all__ = ["Section", "build", "group_warnings", "headline_lines", "unavailable_notes"]
