"""The communication analyzer (overlap per rank + cross-rank collectives) and ``tracekit.analyze``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from ..errors import EmptyWindowError
from ..model.traceset import TraceSet
from .collectives import CrossRank, cross_rank
from .dimensions import dimension_map
from .instances import Instances, UnrecognisedKernel, unrecognised_kernels
from .memory import ActivationComparison
from .overlap import RankOverlap, rank_overlap


@dataclass(frozen=True, slots=True)
class CommOptions:
    dim_map: tuple[str, ...] = ()  # "PATTERN=DIM" overrides of the group -> dimension rules
    align_clocks: bool = True
    top_unrecognised: int = 10


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

    def rank(self, rank: int) -> RankOverlap:
        return next(r for r in self.ranks if r.rank == rank)

    def to_dict(self) -> dict:
        from .summary_schema import comm_sections

        return comm_sections(self)


class CommAnalyzer:
    name: ClassVar[str] = "comm"
    Options: ClassVar[type] = CommOptions

    def run(self, traces: TraceSet, options: CommOptions = CommOptions()) -> CommResult:
        if len(traces) == 0:
            raise EmptyWindowError("analyze: the trace set holds no rank; pass trace files or a directory of them")
        dims = dimension_map(traces, options.dim_map)
        ranks = tuple(rank_overlap(table, traces.info(r)) for r, table in traces)
        inst = Instances.concat([r.instances for r in ranks])
        inst = inst.with_columns(dimension=_dimensions(dims, inst))
        multi = len(traces) > 1
        cross = cross_rank(inst, traces.ranks, options.align_clocks if multi else False)
        unrec = _merge_unrecognised([unrecognised_kernels(t, options.top_unrecognised) for _, t in traces],
                                    options.top_unrecognised)
        warnings = tuple(w for r in ranks for w in r.warnings) + cross.mismatches
        return CommResult(ranks, cross, unrec, multi, warnings)


def _dimensions(dims, inst: Instances) -> np.ndarray:
    """Each instance's dimension, resolved once per distinct (pg_name, pg_desc, pg_ranks)."""
    cols = ("pg_name", "pg_desc", "pg_ranks")
    if len(inst) == 0:
        return np.empty(0, object)
    codes = np.stack([pd.factorize(inst[c], use_na_sentinel=False)[0] for c in cols], axis=1)
    _, first, inverse = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    names = np.array([dims.dimension(*(inst[c][i] for c in cols[:2]), _ranks(inst["pg_ranks"][i])) for i in first],
                     dtype=object)
    return names[inverse.reshape(-1)]


def _ranks(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in str(text).strip("[]() ").replace(" ", "").split(",") if x)
    except ValueError:
        return ()


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


@dataclass(frozen=True, slots=True)
class Analysis:
    """What ``tracekit.analyze`` returns: the analyzers' results and the run; ``to_dict()`` is the
    ``tracekit.summary/1`` JSON contract (docs/summary-schema.md)."""

    traces: TraceSet = field(repr=False)
    comm: CommResult
    activation: ActivationComparison | None = None  # when the run directory holds activation_r*.json

    def to_dict(self) -> dict:
        from .summary_schema import build_summary

        out = build_summary(self.traces, self.comm)
        if self.activation is not None:
            out["activation_memory"] = self.activation.to_dict()
        return out

    def timeline(self) -> dict:
        """The ``tracekit.timeline/1`` record (one representative step per rank; docs/report-inputs.md). Not part
        of ``to_dict()``: it grows with the number of kernels of a step."""
        from .timeline_record import build_timeline

        return build_timeline(self.traces, self.comm.ranks)

    def annotation(self, rank: int) -> tuple[list[list], list[dict]]:
        """For `tracekit annotate`: the rank's hidden/exposed pieces over all steps as [[start_us, end_us,
        category], ...] and its collectives as {"dimension", "start_us", "dur_us"}, in the trace's time base."""
        from .timeline_record import comm_pieces, pieces_us, us

        info = self.traces.info(rank)
        hidden, exposed = comm_pieces(self.traces.table(rank), info)
        inst = self.comm.instances
        m = inst["rank"] == rank
        base = info.base_time_ns
        cols = [{"dimension": d or "unknown", "start_us": us(s - base), "dur_us": (e - s) / 1e3}
                for d, s, e in zip(inst["dimension"][m], inst["start_ns"][m].tolist(), inst["end_ns"][m].tolist())]
        return pieces_us([("hidden", hidden), ("exposed", exposed)], base), cols
