"""The obvious what-if questions of a run, answered by replaying its dependency graph (tracekit.analyzers.graph.whatif):
each parallel dimension's communication free, each dimension at twice the bandwidth, and the slowest rank's extra
host time gone; with the identity replay's error beside them, so a reader sees how far to trust the answers.

Each answer is the same replay that ``tracekit whatif --set SPEC`` runs, so the HTML report's what-if table and the
command line give the same figures (its ``specs`` are the exact ``--set`` arguments). The slowest rank is the one
with the most host time inside the step windows; its *extra* host time is what it has above the median of the other
ranks, removed by scaling its host time with ``rank:R:host=F``, F = that median / its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ... import units
from ...model.traceset import TraceSet
from .build import HOST_CHAIN, TRANSFER, Graph, build_graph
from .critical_path import CriticalPaths, critical_paths
from .whatif import Spec, measured_step_times, predicted_step_times, scaled_durations


@dataclass(frozen=True, slots=True)
class Answer:
    """One question: its ``--set`` specs and the step times summed over the run's steps."""

    question: str
    specs: tuple[str, ...]
    measured_ns: int
    predicted_ns: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        saving = 1 - self.predicted_ns / self.measured_ns if self.measured_ns else 0.0
        return {
            "question": self.question,
            "specs": list(self.specs),
            "measured_us": self.measured_ns / 1e3,
            "predicted_us": self.predicted_ns / 1e3,
            "saving_share": saving,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class WhatIfTable:
    answers: tuple[Answer, ...]
    steps: int
    replay_error: float  # as WhatIf.replay_error: the largest |identity replay - measured| / measured over steps
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "replay_error": self.replay_error,
            "answers": [a.to_dict() for a in self.answers],
            "notes": list(self.notes),
        }


def dimensions(g: Graph) -> list[str]:
    """The parallel dimensions whose collectives have transfer nodes (each one a ``comm:DIM`` spec matches)."""
    return sorted({str(d) for d in g.dimension[g.kind == TRANSFER] if str(d)})


def slowest_rank(g: Graph) -> tuple[int, float, str] | None:
    """(rank, factor, why) for the rank with the most host time inside the step windows, the factor taking it to
    the median of the other ranks; None with one rank or when it has no more host time than the others."""
    host = (g.chain_type[g.chain] == HOST_CHAIN) & (g.rank >= 0)
    inside = np.zeros(len(g), bool)
    for lo, hi in _step_bounds(g):
        inside |= (g.start >= lo) & (g.start <= hi)
    ranks = np.unique(g.rank[host])
    if len(ranks) < 2:
        return None
    sel = host & inside
    per_rank = np.zeros(int(ranks.max()) + 1, np.int64)  # one pass over the nodes, not one per rank
    np.add.at(per_rank, g.rank[sel], g.dur[sel].astype(np.int64))
    totals = {int(r): int(per_rank[r]) for r in ranks}
    r = max(totals, key=lambda k: (totals[k], -k))
    others = float(np.median([v for k, v in totals.items() if k != r]))
    if totals[r] <= 0 or others >= totals[r]:
        return None
    why = (
        f"rank {r} has {units.duration(totals[r] / 1e3)} of host time in the steps, the other ranks a median of "
        f"{units.duration(others / 1e3)}"
    )
    return r, others / totals[r], why


def _step_bounds(g: Graph) -> list[tuple[int, int]]:
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for w in g.windows:
        lo[w.step] = min(lo.get(w.step, w.start_ns), w.start_ns)
        hi[w.step] = max(hi.get(w.step, w.end_ns), w.end_ns)
    return [(lo[k], hi[k]) for k in lo]


def questions(g: Graph) -> list[tuple[str, tuple[str, ...]]]:
    """(question, specs) for the run: per dimension free and 2x bandwidth, then the slowest rank's extra host."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for d in dimensions(g):
        out.append((f"{d} communication free", (f"comm:{d}=0",)))
        out.append((f"{d} at 2x bandwidth", (f"comm:{d}=0.5",)))
    slow = slowest_rank(g)
    if slow is not None:
        r, f, _ = slow
        out.append((f"rank {r}'s extra host time gone", (f"rank:{r}:host={f:.6g}",)))
    return out


def obvious_questions(traces: TraceSet, graph: Graph) -> WhatIfTable:
    """Replay ``graph`` for each of ``questions(graph)``: measured and predicted time summed over the steps."""
    measured = measured_step_times(graph)
    replayed, _ = predicted_step_times(graph, graph.dur)
    total = sum(measured.values())
    err = max((abs(replayed[k] - v) / v for k, v in measured.items() if v), default=0.0)
    answers = [Answer("no change (identity replay)", (), total, sum(replayed.values()))]
    for question, specs in questions(graph):
        dur, notes = scaled_durations(graph, traces, [Spec.parse(s) for s in specs])
        predicted, _ = predicted_step_times(graph, dur)
        answers.append(Answer(question, specs, total, sum(predicted.values()), tuple(notes)))
    notes = []
    slow = slowest_rank(graph)
    if slow is not None:
        notes.append(slow[2])
    elif len({int(r) for r in graph.rank if r >= 0}) < 2:
        notes.append("one rank: no slowest rank to compare with the others")
    if not dimensions(graph):
        notes.append("no collective transfers with a parallel dimension: no communication questions")
    return WhatIfTable(tuple(answers), len(measured), err, tuple(notes))


@dataclass(frozen=True, slots=True)
class CriticalSection:
    """The summary's ``critical_path`` section: the critical paths (its ``steps``, ``verdict``, ``notes``) and
    the what-if table under ``whatif``."""

    paths: CriticalPaths
    table: WhatIfTable

    @property
    def steps(self):
        return self.paths.steps

    @property
    def verdict(self) -> str:
        return self.paths.verdict

    @property
    def notes(self) -> tuple[str, ...]:
        return self.paths.notes

    def to_dict(self) -> dict:
        return {**self.paths.to_dict(), "whatif": self.table.to_dict()}


@dataclass(frozen=True, slots=True)
class CriticalPathOptions:
    # analyze() passes False unless asked: the graph over all ranks costs about as much as the analysis itself
    critical_path: bool = True
    window: str | None = None  # None: ProfilerStep#N; else the annotation whose instances are the windows
    dim_map: tuple[str, ...] = ()
    align_clocks: bool = True


def critical_section(analysed: TraceSet, window: str | None, comm) -> CriticalSection:
    """The critical path of each step over all ranks and the obvious what-if questions, from one dependency graph
    of the analysed tables."""
    graph = build_graph(analysed, window, comm)  # once, for the path and the what-ifs
    return CriticalSection(critical_paths(analysed, graph=graph), obvious_questions(analysed, graph))


class CriticalPathAnalyzer:
    """The Analyzer protocol (analyzers/registry.py): the summary's ``critical_path`` section, on the tables the
    analysis resolved (``steps``) with its collectives (``comm``); alone, with a comm analysis of its own. ``None``
    unless ``critical_path`` is set."""

    name: ClassVar[str] = "critical_path"
    Options: ClassVar[type] = CriticalPathOptions
    needs: ClassVar[tuple[str, ...]] = ("comm", "steps")

    def run(
        self, traces: TraceSet, options: CriticalPathOptions = CriticalPathOptions(), inputs: Mapping = {}
    ) -> CriticalSection | None:
        if not options.critical_path:
            return None
        if "steps" in inputs:
            traces = inputs["steps"].traces
        comm = inputs.get("comm")
        if comm is None:
            from ..comm.communication import CommAnalyzer, CommOptions

            comm = CommAnalyzer().run(
                traces, CommOptions(dim_map=options.dim_map, align_clocks=options.align_clocks, window=options.window)
            )
        return critical_section(traces, options.window, comm)
