"""``analyze_files``: load and analyse a run's traces with the per-rank work next to each load (map) and only the
cross-rank work in the parent (reduce), so that the parent holds the small per-rank results and the collective
instances, not every rank's event table (tracekit.analyzers.per_rank).

The result is the ``Analysis`` that ``analyze(load(paths))`` returns, figure for figure. Its TraceSet reads a
rank's table back from the trace when one is asked for (``ReloadedTables``); with ``critical_path=True`` the
tables come back from the workers instead, because the dependency graph spans every rank's events. One trace, or
Nsight exports (whose ranks are numbered only once every export is read), take the plain path.
"""

from __future__ import annotations

from dataclasses import replace

from ..loader.executors import map_files
from ..loader.loading import LoadOptions, _manifest_for, assemble_infos, load
from ..loader.nsys import is_export
from ..loader.paths import find_traces
from ..model.traceset import TraceSet
from .analysis import Analysis
from .breakdowns.rank_breakdowns import BreakdownOptions
from .comm.communication import CommOptions, StepTables, combine
from .memory.timeline import MemoryTimelineOptions
from .per_rank import RankJob, ReloadedTables, analyse_file
from .rank_detail import detail_limit
from .registry import _options, analyze, assemble, check_options, run_entries


def analyze_files(
    paths, *, options: LoadOptions | None = None, executor=None, progress: bool | None = None, critical_path: bool = False, **kw
) -> Analysis:
    """``analyze(load(paths, options=..., executor=...), critical_path=..., **kw)``, computed rank by rank where
    each rank loads. ``kw``: the analyzers' options, as ``analyze`` takes them."""
    check_options(kw, "analyze_files()")
    options = options or LoadOptions()
    files = find_traces(paths)
    if len(files) == 1 or any(is_export(f) for f in files):
        return analyze(load(paths, options=options, executor=executor, progress=progress), critical_path=critical_path, **kw)
    comm_opts = _options(CommOptions, kw)
    detail = detail_limit(len(files))  # one rank per Kineto trace
    memory = _options(MemoryTimelineOptions, kw)
    job = RankJob(
        options,
        comm_opts.window,
        comm_opts.top_unrecognised,
        _options(BreakdownOptions, kw),
        replace(memory, memory_points=detail.memory(memory.memory_points)),
        keep_table=critical_path,
        detail=detail,
        instance=comm_opts.instance,
    )
    parts = map_files(analyse_file, files, job, executor=executor, progress=progress)
    manifest, manifest_warnings = _manifest_for(paths)
    infos, metadata = assemble_infos(
        files, [p.info for p in parts], [p.first_ns for p in parts], manifest, (*options.rules.notes, *manifest_warnings)
    )
    by_rank = {p.info.rank: p for p in parts}
    if critical_path:
        traces = TraceSet({r: by_rank[r].table for r in infos}, infos, metadata)
    else:
        traces = TraceSet(ReloadedTables({r: i.source for r, i in infos.items()}, infos, job), infos, metadata)
    ordered = [by_rank[r] for r in traces.ranks]
    comm = combine(
        traces,
        tuple(p.overlap for p in ordered),
        [p.unrecognised for p in ordered],
        {r: by_rank[r].analysed_first_ns for r in traces.ranks},
        comm_opts,
        {r: by_rank[r].device_events for r in traces.ranks},
    )
    done = {  # the per-rank entries, computed where each rank loaded; the registry runs the rest in the parent
        "comm": comm,
        "steps": StepTables(traces, {}),  # the workers analysed the steps comm resolved
        "breakdowns": {r: by_rank[r].breakdowns for r in traces.ranks},
        "memory_timeline": {r: by_rank[r].memory for r in traces.ranks},
    }
    del parts, ordered, by_rank
    return assemble(run_entries(traces, {**kw, "critical_path": critical_path}, done))
