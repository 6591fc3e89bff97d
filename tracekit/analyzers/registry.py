"""The Analyzer protocol, the explicit list of analyzers and ``analyze()``, which runs each of them in order."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..model.traceset import TraceSet
from ..runtime.memory import release_free_memory
from .analysis import Analysis
from .breakdowns.rank_breakdowns import BreakdownAnalyzer
from .comm.communication import CommAnalyzer
from .comm.overlap import restep
from .memory.activation_run import ActivationMemoryAnalyzer
from .memory.timeline import MemoryTimelineAnalyzer
from .rank_detail import detail_limit


@runtime_checkable
class Analyzer(Protocol):
    """What every analyzer is: a name, an Options dataclass, and run(traces, options) -> a frozen result."""

    name: ClassVar[str]
    Options: ClassVar[type]

    def run(self, traces: TraceSet, options: Any) -> Any:
        """Analyse ``traces`` and return a frozen result with ``to_dict()``."""
        ...


# In order: the communication analyzer resolves the steps; the analyzers after it see the tables with the steps it
# resolved (duplicates, nesting, --window).
ANALYZERS: tuple[Analyzer, ...] = (CommAnalyzer(), ActivationMemoryAnalyzer(), BreakdownAnalyzer(), MemoryTimelineAnalyzer())


def analyze(traces: TraceSet, *, critical_path: bool = False, **options) -> Analysis:
    """Analyse a TraceSet: ``tracekit.analyze(load(paths), dim_map=("mesh_fsdp*=dp",))``. Runs every analyzer of
    ``tracekit.analyzers.ANALYZERS``, each with the keyword options its ``Options`` dataclass declares. Activation
    memory is compared with the model when the run directory holds ``activation_r{rank}.json`` and ``run.json``
    gives the model's dimensions (tracekit.analyzers.memory.activation_run). ``critical_path=True`` adds the critical path
    of each step over all ranks (tracekit.analyzers.graph.critical_path; docs/whatif.md) as the summary's
    ``critical_path`` section."""
    unknown = set(options) - {f.name for a in ANALYZERS for f in fields(a.Options)}
    if unknown:
        raise TypeError(f"analyze() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    results: dict[str, Any] = {}
    analysed = traces
    plans: dict[int, Any] = {}
    for a in ANALYZERS:
        opts = _options(a.Options, options)
        if a.name == "breakdowns":  # the windows the tables were re-stepped with: not planned a second time
            opts = replace(opts, plans=plans)
        if a.name == "memory_timeline":  # many ranks: fewer points each (analyzers/rank_detail.py)
            opts = replace(opts, memory_points=detail_limit(len(traces)).memory(opts.memory_points))
        results[a.name] = a.run(analysed, opts)
        if a.name == "comm":  # the steps as the analysis resolved them
            plans = {r.rank: r.plan for r in results["comm"].ranks if r.plan is not None}
            analysed = traces.with_tables({r: restep(t, plans[r]) if r in plans else t for r, t in traces})
    comm, activation = results["comm"], results["activation_memory"]
    if activation.warnings:
        comm = replace(comm, warnings=comm.warnings + activation.warnings)
    # opt-in: the dependency graph over all ranks costs about as much as the analysis itself
    paths = critical_section(analysed, options.get("window"), results["comm"]) if critical_path else None
    release_free_memory()  # the analyzers' temporaries leave holes in the C heap (~0.3 GB at 5 M events)
    return Analysis(analysed, comm, activation.comparison, results["breakdowns"], paths, memory=results["memory_timeline"])


def critical_section(analysed: TraceSet, window: str | None, comm) -> Any:
    """The critical path of each step over all ranks and the obvious what-if questions, from one dependency graph
    of the analysed tables."""
    from .graph.build import build_graph
    from .graph.critical_path import critical_paths
    from .graph.whatif_table import CriticalSection, obvious_questions

    graph = build_graph(analysed, window, comm)  # once, for the path and the what-ifs
    return CriticalSection(critical_paths(analysed, graph=graph), obvious_questions(analysed, graph))


def _options(cls: type, options: dict) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: tuple(v) if k == "dim_map" else v for k, v in options.items() if k in names})
