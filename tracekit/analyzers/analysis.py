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

    # -- notebooks: the headline and the counts, never the tables (to_dict() and the *_frame() accessors have them)
    def _headline(self) -> dict[str, Any]:
        ranks = self.comm.ranks
        n = sum(len(r.complete_steps) for r in ranks)
        tot = {k: sum(getattr(r.totals, k) for r in ranks) for k in ("wall_ns", "comm_ns", "hidden_comm_ns", "exposed_comm_ns")}
        return {
            "steps": n,
            "all_steps": sum(len(r.steps) for r in ranks),
            "step_us": tot["wall_ns"] / n / 1e3 if n else None,
            "exposed_share": tot["exposed_comm_ns"] / tot["wall_ns"] if tot["wall_ns"] else None,
            "overlap_ratio": tot["hidden_comm_ns"] / tot["comm_ns"] if tot["comm_ns"] else None,
        }

    def __repr__(self) -> str:
        """``Analysis(TraceSet(...); 12/12 complete steps, step time 281.0 ms, exposed 36.9 %, overlap 14.9 %, ...)``."""
        from .. import units

        h = self._headline()
        extra = ", critical path" if self.critical is not None else ""
        return (
            f"Analysis({self.traces!r}; {h['steps']}/{h['all_steps']} complete steps, step time "
            f"{units.duration(h['step_us'])}, exposed {units.percent(h['exposed_share'])}, overlap "
            f"{units.percent(h['overlap_ratio'])}, {len(self.comm.instances):,} collectives, {len(self.comm.warnings)} "
            f"warnings{extra}; .to_dict(), .steps_frame(), .collectives_frame(), ...)"
        )

    def _repr_html_(self) -> str:
        from .. import units
        from ..model.display import html_table

        h = self._headline()
        caption = (
            f"Analysis of {self.traces._loaded()}: step time {units.duration(h['step_us'])}, exposed communication "
            f"{units.percent(h['exposed_share'])} of the step, overlap {units.percent(h['overlap_ratio'])} (complete "
            f"steps {h['steps']} of {h['all_steps']}; .steps_frame() and the other frames have every row)"
        )
        rows = []
        for r in self.comm.ranks:
            t, n = r.totals, len(r.complete_steps)
            rows.append(
                (
                    r.rank,
                    f"{n}/{len(r.steps)}",
                    units.duration(t.wall_ns / n / 1e3) if n else units.NA,
                    units.duration(t.comm_ns / n / 1e3) if n else units.NA,
                    units.duration(t.exposed_comm_ns / n / 1e3) if n else units.NA,
                    units.percent(t.overlap_ratio) if n and t.comm_ns else units.NA,
                )
            )
        return html_table(caption, ("rank", "steps", "step time", "comm / step", "exposed / step", "overlap"), rows)

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
