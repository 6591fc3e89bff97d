"""The communication analyzer: overlap per rank, then the cross-rank collectives (matching, wait/transfer, clock
offsets, stragglers) and the parallel dimension of each instance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from ...errors import EmptyWindowError
from ...loader.classify import RuleSet
from ...model.traceset import TraceSet
from .collectives import CrossRank, cross_rank
from .dimensions import dimension_map, dimension_warnings
from .instances import Instances, UnrecognisedKernel, unrecognised_kernels
from .overlap import RankOverlap, rank_overlap, restep
from .steps import plan_steps
from .truncation import DeviceEvents, loss_warnings


@dataclass(frozen=True, slots=True)
class CommOptions:
    dim_map: tuple[str, ...] = ()  # "PATTERN=DIM" overrides of the group -> dimension rules
    align_clocks: bool = True
    top_unrecognised: int = 10
    window: str | None = None  # an annotation name or glob whose instances are the steps (default ProfilerStep)
    instance: int | None = None  # with window: only this instance (nested ones counted, in start order)
    allow_empty: bool = False  # return a result without complete steps instead of raising EmptyWindowError


@dataclass(frozen=True, slots=True)
class CommResult:
    ranks: tuple[RankOverlap, ...]
    cross: CrossRank
    unrecognised: tuple[UnrecognisedKernel, ...]
    multi_rank: bool
    warnings: tuple[str, ...] = ()

    @property
    def instances(self) -> Instances:
        return self.cross.instances

    def __repr__(self) -> str:  # one line: the tables stay in to_dict() and the frames
        return f"CommResult({len(self.ranks)} ranks, {len(self.instances):,} collective instances, {len(self.warnings)} warnings)"

    def rank(self, rank: int) -> RankOverlap:
        return next(r for r in self.ranks if r.rank == rank)

    def to_dict(self) -> dict:
        from ..summary_schema import comm_sections

        return comm_sections(self)


class CommAnalyzer:
    name: ClassVar[str] = "comm"
    Options: ClassVar[type] = CommOptions
    needs: ClassVar[tuple[str, ...]] = ()

    def run(self, traces: TraceSet, options: CommOptions = CommOptions(), inputs: Mapping = {}) -> CommResult:
        if len(traces) == 0:
            raise EmptyWindowError("analyze: the trace set holds no rank; pass trace files or a directory of them")
        traces, ranks = analysed_ranks(traces, options.window, options.instance)
        unrec = [unrecognised_kernels(t, options.top_unrecognised) for _, t in traces]
        return combine(traces, ranks, unrec, first_times(traces), options)


@dataclass(frozen=True, slots=True)
class StepOptions:
    """The step tables take no option of their own: the windows are the comm analyzer's."""


@dataclass(frozen=True, slots=True)
class StepTables:
    """The tables as the analysis resolved the steps (duplicates, nesting, ``--window``): each rank's table
    re-stepped with the comm analyzer's plan, and the plans, for the analyzers that work on steps."""

    traces: TraceSet
    plans: Mapping[int, object]


class StepTablesAnalyzer:
    """The registry entry that hands the comm analyzer's steps on: analyzers that need ``steps`` see these tables,
    so that no one plans the steps a second time."""

    name: ClassVar[str] = "steps"
    Options: ClassVar[type] = StepOptions
    needs: ClassVar[tuple[str, ...]] = ("comm",)

    def run(self, traces: TraceSet, options: StepOptions, inputs: Mapping) -> StepTables:
        plans = {r.rank: r.plan for r in inputs["comm"].ranks if r.plan is not None}
        return StepTables(traces.with_tables({r: restep(t, plans[r]) if r in plans else t for r, t in traces}), plans)


def combine(
    traces: TraceSet,
    ranks: tuple[RankOverlap, ...],
    unrecognised: Sequence[Sequence[UnrecognisedKernel]],
    starts: Mapping[int, int | None],
    options: CommOptions = CommOptions(),
    device_events: Mapping[int, DeviceEvents] | None = None,
) -> CommResult:
    """The cross-rank half: from each rank's overlap and collective instances (``ranks``, in rank order), its
    unrecognised kernels, its first event time (``starts``, None when it has none) and its device events
    (``device_events``: what a truncated rank kept, against the whole ranks; counted from the tables when not
    given), the matched collectives, clocks, stragglers and dimensions. ``traces`` is read for its RankInfos and
    metadata only, never its tables, when ``device_events`` is given."""
    _require_steps(traces, ranks, options)
    dims = dimension_map(traces, options.dim_map)
    inst = Instances.concat([r.instances for r in ranks])
    libraries = comm_libraries(inst["name"])
    inst = inst.with_columns(dimension=_dimensions(dims, inst, libraries))
    dim_warnings = dimension_warnings(inst, libraries, inst["dimension"], dims.overrides)
    multi = len(traces) > 1
    clockless, clock_warnings = clockless_ranks(traces, starts)
    usable = [r for r in traces.ranks if r not in clockless]
    cross = cross_rank(
        inst.select(~np.isin(inst["rank"], clockless)) if clockless else inst,
        usable,
        options.align_clocks if len(usable) > 1 else False,
        int(traces.metadata.world_size or 0),
    )
    if clockless:
        cross = replace(cross, instances=_unmatched(cross.instances, inst.select(np.isin(inst["rank"], clockless))))
    unrec = _merge_unrecognised(unrecognised, options.top_unrecognised)
    warnings = tuple(w for r in ranks for w in r.warnings) + tuple(clock_warnings) + cross.mismatches + tuple(dim_warnings)
    warnings += tuple(loss_warnings(traces, device_events))
    return CommResult(ranks, cross, unrec, multi, warnings)


def first_times(traces: TraceSet) -> dict[int, int | None]:
    """rank -> the time of its first event (None for an empty table)."""
    return {r: int(t["ts_ns"].min()) if len(t) else None for r, t in traces}


def analysed_ranks(
    traces: TraceSet, window: str | None = None, instance: int | None = None
) -> tuple[TraceSet, tuple[RankOverlap, ...]]:
    """Resolve each rank's steps (tracekit.analyzers.comm.steps) and measure them. The TraceSet returned carries the
    tables as the analysis saw them (resolved step column, dropped rows gone)."""
    tables, ranks = {}, []
    for r, table in traces:
        plan = plan_steps(table, traces.info(r), window, instance)
        tables[r] = restep(table, plan)
        ranks.append(rank_overlap(tables[r], traces.info(r), plan))
    return traces.with_tables(tables), tuple(ranks)


def _require_steps(traces: TraceSet, ranks: tuple[RankOverlap, ...], options: CommOptions) -> None:
    """No data is not success: without a complete step anywhere, EmptyWindowError (unless allowed)."""
    if options.allow_empty or any(r.complete_steps for r in ranks):
        return
    what = f"no instance of --window {options.window!r}" if options.window else "no step"
    if options.window and options.instance is not None:
        what = f"no instance {options.instance} of --window {options.window!r}"
    if any(r.steps for r in ranks):
        n = sum(len(r.steps) for r in ranks)
        reason = next(s.partial_reason for r in ranks for s in r.steps)
        raise EmptyWindowError(
            f"analyze: all {n} steps of {_sources(traces)} are incomplete ({reason}); nothing "
            "whole to measure: --allow-partial shows them, their figures marked partial and out of every total"
            + (
                "; a truncated trace is whole only when the profiler's export finishes"
                if any(traces.info(r).truncated for r in traces.ranks)
                else ""
            )
        )
    raise EmptyWindowError(
        f"analyze: {what} and no events to measure in {_sources(traces)}; was the profiler "
        "active (or is the --window name right)?"
    )


def _sources(traces: TraceSet) -> str:
    srcs = [traces.info(r).source or f"rank {r}" for r in traces.ranks]
    return ", ".join(srcs[:3]) + (f" and {len(srcs) - 3} more" if len(srcs) > 3 else "")


def clockless_ranks(traces: TraceSet, starts: Mapping[int, int | None] | None = None) -> tuple[list[int], list[str]]:
    """Ranks whose clock cannot be put beside the others': the trace lost its ``baseTimeNanoseconds`` (a
    truncated file: Kineto writes it after the events) while other ranks have one, or it starts more than an
    hour away from the other ranks (another run; ``starts``: rank -> first event time, from the tables when not
    given); and truncated ranks, whose lost collectives would move their
    peers' figures. They are left out of every cross-rank figure, as if not loaded."""
    if len(traces) < 2:
        return [], []
    infos = {r: traces.info(r) for r in traces.ranks}
    with_base = [r for r, i in infos.items() if i.base_time_ns]
    out: dict[int, str] = {}
    if with_base:
        for r, i in infos.items():
            if not i.base_time_ns:
                out[r] = (
                    "no usable clock: its trace has no baseTimeNanoseconds (truncated: it comes after the events)"
                    if i.truncated
                    else "no usable clock: its trace has no baseTimeNanoseconds while the others have one"
                )
    for r, i in infos.items():
        if i.truncated and r not in out:
            out[r] = (
                "truncated trace: the collectives it lost would leave its peers' instances unmatched and shift the clock estimate"
            )
    starts = first_times(traces) if starts is None else starts
    known = {r: t0 for r, t0 in starts.items() if t0 is not None and r not in out}
    if len(known) >= 2:
        mid = float(np.median(list(known.values())))
        for r, t0 in known.items():
            if abs(t0 - mid) > 3600e9:
                out[r] = f"no usable clock: it starts {abs(t0 - mid) / 1e9:.0f} s away from the other ranks (another run?)"
    warnings = [
        f"rank {r}: {why}; left out of the cross-rank figures (wait, transfer, skew, clock offsets, stragglers, bus bandwidth)"
        for r, why in sorted(out.items())
    ]
    return sorted(out), warnings


def _unmatched(matched: Instances, rest: Instances) -> Instances:
    """``rest`` with the cross-rank columns of ``matched`` left empty (NaN, match -1), appended to it."""
    n = len(rest)
    cols = dict(rest.columns)
    for k in matched.columns:
        if k not in cols:
            cols[k] = np.full(n, -1, np.int64) if k == "match_id" else np.full(n, np.nan)
    for k in ("wait_ns", "transfer_ns"):
        cols[k] = np.full(n, np.nan)
    return Instances.concat([matched, Instances({k: cols[k] for k in matched.columns})])


def _dimensions(dims, inst: Instances, libraries: np.ndarray) -> np.ndarray:
    """Each instance's dimension, resolved once per distinct (pg_name, pg_desc, pg_ranks, library)."""
    cols = ("pg_name", "pg_desc", "pg_ranks")
    if len(inst) == 0:
        return np.empty(0, object)
    codes = np.stack([pd.factorize(inst[c], use_na_sentinel=False)[0] for c in cols] + [pd.factorize(libraries)[0]], axis=1)
    _, first, inverse = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    names = np.array(
        [dims.dimension(inst["pg_name"][i], inst["pg_desc"][i], inst["pg_members"][i], libraries[i]) for i in first],
        dtype=object,
    )
    return names[inverse.reshape(-1)]


def comm_libraries(names: np.ndarray) -> np.ndarray:
    """The communication library of each instance's kernel by the shipped name rules ("" for none), once per
    distinct name."""
    if len(names) == 0:
        return np.empty(0, object)
    codes, uniq = pd.factorize(names)
    libs = [r.library if r is not None else "" for r in RuleSet().match(str(u) for u in uniq)]
    return np.array(libs, dtype=object)[codes]


def _merge_unrecognised(per_rank, top: int) -> tuple[UnrecognisedKernel, ...]:
    acc: dict[str, list] = {}
    for items in per_rank:
        for k in items:
            a = acc.setdefault(k.name, [0, 0, set()])
            a[0] += k.count
            a[1] += k.total_ns
            a[2].update(k.streams)
    merged = [UnrecognisedKernel(n, c, t, tuple(sorted(s))) for n, (c, t, s) in acc.items()]
    return tuple(sorted(merged, key=lambda k: -k.total_ns)[:top])
