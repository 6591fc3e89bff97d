"""The per-rank half of the analysis, run where each rank loads (a worker of the local pool, a Dask worker), and
what it hands the parent: a ``RankPart`` per rank, never the rank's event table unless the caller needs it.

Everything an analysis computes from one rank alone -- its steps, overlap per step and stream, its collective
instances (the small per-collective table the cross-rank work reads), the unrecognised kernels on its comm streams,
the single-rank breakdowns and the memory timeline -- is a function of that rank's table. Doing it next to the load
means the parent receives kilobytes per rank instead of the table: the cross-rank analysis (matching, clocks,
stragglers, dimensions) and the summary need nothing else. The dependency graph over all ranks still needs every
table (``keep_tables``); a table asked for later (a rank's timeline, one trace's annotation) is read back from its
file by ``ReloadedTables``, through the Parquet cache when it is on.

The parts equal what ``analyze(load(...))`` computes rank by rank: the same functions on the same table
(tests/unit/analyzers/test_per_rank.py holds the two paths to each other).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ..loader.loading import LoadOptions, load_file
from ..model.events import EventTable
from ..model.traceset import RankInfo, RunMetadata, TraceSet
from .breakdowns.rank_breakdowns import BreakdownOptions, rank_breakdowns
from .comm.instances import UnrecognisedKernel, unrecognised_kernels
from .comm.overlap import RankOverlap, rank_overlap, restep
from .comm.steps import StepPlan, plan_steps
from .comm.truncation import DeviceEvents, device_events
from .memory.timeline import MemoryTimelineOptions, RankMemory, rank_memory
from .rank_detail import DetailLimit, Sections, cut


@dataclass(frozen=True, slots=True)
class RankJob:
    """What a worker needs to load and analyse one rank (pickled to it)."""

    load: LoadOptions
    window: str | None = None
    top_unrecognised: int = 10
    breakdowns: BreakdownOptions = field(default_factory=BreakdownOptions)
    memory: MemoryTimelineOptions = field(default_factory=MemoryTimelineOptions)
    keep_table: bool = False  # hand the analysed table back too (the dependency graph needs every rank's)
    detail: DetailLimit = field(default_factory=lambda: DetailLimit(1))  # the breakdowns' rows kept (rank_detail.py)
    instance: int | None = None  # with window: only this instance (CommOptions.instance)


@dataclass(frozen=True, slots=True)
class RankPart:
    """One rank after its per-rank analysis: its RankInfo, the comm analyzer's per-rank result (steps, streams,
    collective instances; the step plan without its per-event columns unless the table is kept), the unrecognised
    kernels, the breakdowns' summary sections (cut to the job's DetailLimit) and the memory timeline, the first
    event times the run checks read (the loaded table's and the analysed table's, None when empty) and the device
    events a truncated rank is held against (comm/truncation.py)."""

    info: RankInfo
    overlap: RankOverlap
    unrecognised: tuple[UnrecognisedKernel, ...]
    breakdowns: Sections
    memory: RankMemory
    first_ns: int | None
    analysed_first_ns: int | None
    events: int
    device_events: DeviceEvents
    table: EventTable | None = None


def analyse_table(table: EventTable, info: RankInfo, job: RankJob) -> RankPart:
    """The per-rank analyses of one loaded table, as ``analyze()`` runs them (steps resolved first, then the
    overlap, the breakdowns on the re-stepped table with the same plan, the memory timeline)."""
    first = int(table["ts_ns"].min()) if len(table) else None
    plan = plan_steps(table, info, job.window, job.instance)
    analysed = restep(table, plan)
    overlap = rank_overlap(analysed, info, plan)
    unrec = tuple(unrecognised_kernels(analysed, job.top_unrecognised))
    one = TraceSet({info.rank: analysed}, {info.rank: info}, RunMetadata(world_size=info.world_size))
    options = replace(job.breakdowns, plans={info.rank: plan}, window=job.window)
    breakdowns = cut(rank_breakdowns(one, info.rank, options), job.detail)
    memory = rank_memory(analysed, info.rank, job.memory)
    if not job.keep_table:  # the windows stay (timeline, annotation); the per-event columns go
        overlap = replace(overlap, plan=windows_only(plan))
    return RankPart(
        info,
        overlap,
        unrec,
        breakdowns,
        memory,
        first,
        int(analysed["ts_ns"].min()) if len(analysed) else None,
        len(table),
        device_events(analysed),
        analysed if job.keep_table else None,
    )


def analyse_file(path: str, job: RankJob) -> RankPart:
    """``load_file`` then ``analyse_table``: the map step of ``analyze_files`` (module level, so that it pickles)."""
    table, info = load_file(path, job.load)
    return analyse_table(table, info, job)


def windows_only(plan: StepPlan) -> StepPlan:
    """``plan`` without its per-event step and keep columns."""
    empty_i, empty_b = np.empty(0, plan.step.dtype), np.empty(0, bool)
    return replace(plan, step=empty_i, keep=empty_b)


class ReloadedTables(Mapping[int, EventTable]):
    """rank -> the analysis' table of that rank, read back from its trace file when asked (through the Parquet
    cache when the load used it) and re-stepped as the analysis did. The two most recent are kept: a caller reads
    a rank's table for its pieces, then its pids."""

    def __init__(self, sources: Mapping[int, str], infos: Mapping[int, RankInfo], job: RankJob) -> None:
        self._sources, self._infos, self._job = dict(sources), infos, job
        self._recent: dict[int, EventTable] = {}
        self.reads = 0  # how many tables were read back (the tests count them)

    def __getitem__(self, rank: int) -> EventTable:
        if rank in self._recent:
            return self._recent[rank]
        table, info = load_file(self._sources[rank], self._job.load)
        self.reads += 1
        table = restep(table, plan_steps(table, self._infos.get(rank, info), self._job.window, self._job.instance))
        if len(self._recent) >= 2:
            self._recent.pop(next(iter(self._recent)))
        self._recent[rank] = table
        return table

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._sources))

    def __len__(self) -> int:
        return len(self._sources)

    def __contains__(self, rank: object) -> bool:
        return rank in self._sources
