"""The facade ``tracekit.analyze`` returns: every analyzer's result beside the analysed TraceSet, with the
``tracekit.summary/1`` dict, the timeline record, ``annotate``'s pieces and the DataFrame accessors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model.traceset import TraceSet
from .breakdowns.rank_breakdowns import RankBreakdowns
from .comm.communication import CommResult
from .frames import AnalysisFrames
from .memory.activation_compare import ActivationComparison
from .rank_detail import Sections


@dataclass(frozen=True, slots=True)
class Analysis(AnalysisFrames):
    """What ``tracekit.analyze`` returns: the analyzers' results and the run; ``to_dict()`` is the
    ``tracekit.summary/1`` JSON contract (docs/summary-schema.md); each of its tables is also a DataFrame
    (``steps_frame()``, ``collectives_frame()``, ``kernel_frame()``, ... in tracekit.analyzers.frames)."""

    traces: TraceSet = field(repr=False)
    comm: CommResult
    activation: ActivationComparison | None = None  # when the run directory holds activation_r*.json
    # rank -> kernels, busy partition, idle, launches (as their summary sections when analysed where the rank loaded)
    breakdowns: Mapping[int, RankBreakdowns | Sections] | None = None
    # critical_path.CriticalPaths (per step over all ranks) when analyze(critical_path=True); typed loosely because
    # the critical path builds on this module's CommAnalyzer
    critical: Any = None
    memory: Mapping[int, Any] | None = None  # rank -> memory_timeline.RankMemory

    def to_dict(self) -> dict:
        from .rank_detail import cut, detail_limit, summary_section, warning
        from .summary_schema import build_summary

        out = build_summary(self.traces, self.comm)
        limit = detail_limit(len(out["ranks"]))  # many ranks: each rank's longest rows only (rank_detail.py)
        found = {r: cut(b, limit) for r, b in (self.breakdowns or {}).items()}
        for r in out["ranks"]:  # beside each rank's totals (docs/breakdowns.md)
            if r["rank"] in found:
                r.update(found[r["rank"]].to_dict())
            if self.memory and r["rank"] in self.memory:
                r["memory_timeline"] = self.memory[r["rank"]].to_dict()
        if not limit.whole:
            out["rank_detail"] = summary_section(limit, found)
            out["warnings"] = [*out["warnings"], warning(out["rank_detail"])]
        if self.critical is not None:
            out["critical_path"] = self.critical.to_dict()
        if self.activation is not None:
            out["activation_memory"] = self.activation.to_dict()
        return out

    def timeline(self) -> dict:
        """The ``tracekit.timeline/1`` record (one representative step per rank, at most 32 ranks; docs/report-inputs.md).
        Not part of ``to_dict()``: it grows with the number of kernels of a step."""
        from .comm.timeline_record import build_timeline

        return build_timeline(self.traces, self.comm.ranks, self.comm.cross.offsets, self.critical, self.comm.cross)

    def annotation(self, rank: int) -> tuple[list[list], list[dict]]:
        """For `tracekit annotate`: the rank's hidden/exposed pieces over all steps as [[start_us, end_us,
        category], ...] and its collectives as {"dimension", "start_us", "dur_us"}, in the trace's time base."""
        from .comm.timeline_record import comm_pieces, pieces_us, us

        info = self.traces.info(rank)
        hidden, exposed = comm_pieces(self.traces.table(rank), info, self.comm.rank(rank).plan)
        inst = self.comm.instances
        m = inst["rank"] == rank
        base = info.base_time_ns
        cols = [
            {"dimension": d or "unknown", "start_us": us(s - base), "dur_us": (e - s) / 1e3}
            for d, s, e in zip(inst["dimension"][m], inst["start_ns"][m].tolist(), inst["end_ns"][m].tolist())
        ]
        return pieces_us([("hidden", hidden), ("exposed", exposed)], base), cols
