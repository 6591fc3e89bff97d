"""The Analyzer protocol, the registry of analyzers (``ANALYZERS``, in the order their needs resolve to) and
``analyze()``, which runs every entry with the options its ``Options`` declares and the results it ``needs``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from graphlib import CycleError, TopologicalSorter
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..model.traceset import TraceSet
from ..runtime.memory import release_free_memory
from .analysis import Analysis
from .breakdowns.rank_breakdowns import BreakdownAnalyzer
from .comm.communication import CommAnalyzer, StepTablesAnalyzer
from .graph.whatif_table import CriticalPathAnalyzer
from .memory.activation_run import ActivationMemoryAnalyzer
from .memory.timeline import MemoryTimelineAnalyzer


@runtime_checkable
class Analyzer(Protocol):
    """What every analyzer is: a name, an Options dataclass, the names of the entries whose results it reads
    (``needs``), and ``run(traces, options, inputs)`` -> a frozen result; ``inputs`` maps each name of ``needs`` to
    that entry's result. Run alone (``inputs`` empty), an analyzer computes what it needs itself."""

    name: ClassVar[str]
    Options: ClassVar[type]
    needs: ClassVar[tuple[str, ...]]

    def run(self, traces: TraceSet, options: Any, inputs: Mapping[str, Any]) -> Any:
        """Analyse ``traces`` and return a frozen result."""
        ...


def resolve(entries: Iterable[Analyzer]) -> tuple[Analyzer, ...]:
    """The entries in an order where every entry comes after the ones it needs (ties keep the listed order); a
    need that no entry provides, a name listed twice or a cycle is a ValueError, at import."""
    by_name: dict[str, Analyzer] = {}
    for e in entries:
        if e.name in by_name:
            raise ValueError(f"analyzer registry: {e.name!r} is listed twice")
        by_name[e.name] = e
    for e in by_name.values():
        missing = [n for n in e.needs if n not in by_name]
        if missing:
            raise ValueError(f"analyzer registry: {e.name!r} needs {', '.join(missing)}, which no entry provides")
    sorter = TopologicalSorter({name: e.needs for name, e in by_name.items()})
    try:
        sorter.prepare()
    except CycleError as exc:
        raise ValueError(f"analyzer registry: the needs form a cycle: {' -> '.join(exc.args[1])}") from None
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=list(by_name).index)
        order += ready
        sorter.done(*ready)
    return tuple(by_name[n] for n in order)


# Each entry once, with what it needs: the communication analyzer resolves the steps ("comm"), "steps" hands its
# re-stepped tables on (duplicates, nesting, --window), and the analyzers that need them see the same windows.
ANALYZERS: tuple[Analyzer, ...] = resolve(
    (
        CommAnalyzer(),
        StepTablesAnalyzer(),
        ActivationMemoryAnalyzer(),
        BreakdownAnalyzer(),
        MemoryTimelineAnalyzer(),
        CriticalPathAnalyzer(),
    )
)
OPTION_NAMES = frozenset(f.name for a in ANALYZERS for f in fields(a.Options))


def analyze(traces: TraceSet, *, critical_path: bool = False, **options) -> Analysis:
    """Analyse a TraceSet: ``tracekit.analyze(load(paths), dim_map=("mesh_fsdp*=dp",))``. Runs every analyzer of
    ``tracekit.analyzers.ANALYZERS``, each with the keyword options its ``Options`` dataclass declares. Activation
    memory is compared with the model when the run directory holds ``activation_r{rank}.json`` and ``run.json``
    gives the model's dimensions (tracekit.analyzers.memory.activation_run). ``critical_path=True`` adds the
    critical path of each step over all ranks (tracekit.analyzers.graph.critical_path; docs/whatif.md) as the
    summary's ``critical_path`` section: opt-in, the dependency graph over all ranks costs about as much as the
    analysis itself."""
    check_options(options, "analyze()")
    results = run_entries(traces, {**options, "critical_path": critical_path})
    release_free_memory()  # the analyzers' temporaries leave holes in the C heap (~0.3 GB at 5 M events)
    return assemble(results)


def check_options(options: Mapping[str, Any], caller: str) -> None:
    unknown = set(options) - OPTION_NAMES
    if unknown:
        raise TypeError(f"{caller} got unexpected keyword arguments: {', '.join(sorted(unknown))}")


def run_entries(traces: TraceSet, options: Mapping[str, Any], done: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The result of every entry, by name, in the registry's order; the entries in ``done`` (computed elsewhere,
    rank by rank: analyzers/files.py) are taken as they are."""
    results: dict[str, Any] = dict(done or {})
    for a in ANALYZERS:
        if a.name not in results:
            results[a.name] = a.run(traces, _options(a.Options, options), {n: results[n] for n in a.needs})
    return results


def assemble(results: Mapping[str, Any]) -> Analysis:
    """The facade over the entries' results; every entry's warnings join the summary's, after the comm analyzer's."""
    comm = results["comm"]
    extra = tuple(w for name, r in results.items() if name != "comm" for w in getattr(r, "warnings", ()))
    if extra:
        comm = replace(comm, warnings=comm.warnings + extra)
    return Analysis(
        results["steps"].traces,
        comm,
        results["activation_memory"].comparison,
        results["breakdowns"],
        results["critical_path"],
        memory=results["memory_timeline"],
    )


def _options(cls: type, options: Mapping[str, Any]) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: tuple(v) if k == "dim_map" else v for k, v in options.items() if k in names})
