"""The gate's metrics of one run (RunMetrics), read out of the typed `tracekit.summary/1` (the Structs of
formats/summary.py, docs/summary-schema.md): per (rank, step) values reduced to a Stat. Run-level metrics come from
``ranks[].steps``; dimension/op metrics from ``collectives`` (or, when a summary lists no collectives, from the run
totals in ``by_dimension``). Fields are read as the Structs type them: a figure the summary does not hold is null
and gives no value (the check then says "no value"), never a zero."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import SummaryFormatError
from ..formats.contract import STEP_KEYS, exposed_comm_share
from ..formats.core import to_builtins
from ..formats.summary import (
    CollectiveRow,
    DimensionRow,
    RankSection,
    RunSection,
    StepFigures,
    SummaryDoc,
    Totals,
    summary_from_builtins,
)
from ..model.layout import LayoutError, ParallelLayout
from .stats import Stat, stat_over_ranks

RUN_METRICS = (*STEP_KEYS, "exposed_comm_share")
DIM_METRICS = (
    "count",
    "bytes",
    "comm_us",
    "hidden_comm_us",
    "exposed_comm_us",
    "wait_us",
    "transfer_us",
    "busbw_gbps",
    "overlap_ratio",
    "exposed_comm_share",
)
RATIO_METRICS = frozenset({"overlap_ratio", "exposed_comm_share"})
# Metrics where a smaller value is the regression; for every other metric a larger one is.
LOWER_IS_WORSE = frozenset({"overlap_ratio", "busbw_gbps"})
# Collective-instance field that each summed dimension metric adds up.
_INSTANCE_FIELD = {
    "count": None,
    "bytes": "bytes",
    "comm_us": "dur_us",
    "hidden_comm_us": "hidden_us",
    "exposed_comm_us": "exposed_us",
    "wait_us": "wait_us",
    "transfer_us": "transfer_us",
}
# The by_dimension fields a summed dimension metric reads (overlap_ratio, busbw_gbps and the share have rules).
_DIM_FIELDS = frozenset({"count", "bytes", "comm_us", "hidden_comm_us", "exposed_comm_us", "wait_us", "transfer_us"})


@dataclass(frozen=True, slots=True)
class Scope:
    """A parallel dimension and collective op. ``op == ""`` takes the dimension as a whole (all its ops).
    ``"*"`` in either field is a wildcard that ``expand`` turns into each matching dimension or op."""

    dimension: str
    op: str = ""

    def matches(self, dimension: str, op: str) -> bool:
        return self.dimension in ("*", dimension) and self.op in ("", "*", op)

    @property
    def is_pattern(self) -> bool:
        return "*" in (self.dimension, self.op)

    @property
    def label(self) -> str:
        return self.dimension if not self.op else f"{self.dimension}/{self.op}"

    def expand(self, present: list[Scope]) -> list[Scope]:
        """The concrete scopes a pattern stands for, given the (dimension, op) pairs present in the runs."""
        if not self.is_pattern:
            return [self]
        out = {Scope(s.dimension, "" if not self.op else s.op) for s in present if self.matches(s.dimension, s.op)}
        return sorted(out, key=lambda s: (s.dimension, s.op))


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or not den:
        return None
    return float(num) / float(den)


def _sum(rows: list[CollectiveRow], field: str) -> float:
    """A step's sum of one figure over its collectives. A row without the figure (``wait_us``/``transfer_us`` are
    null where the cross-rank match found no peer) adds nothing; a run where no row has it gets no value at all
    (``dim_stat``), never a sum of zeros."""
    total = 0.0
    for c in rows:
        v = getattr(c, field)
        if v is not None:
            total += float(v)
    return total


class RunMetrics:
    """One run's metrics for the gate: the typed summary (``doc``, a ``formats.summary.SummaryDoc``) and the
    look-ups that reduce its per-step values to a Stat. Built from a Struct (a saved summary, decoded), or from
    a dict (a fresh analysis, a test's hand-built summary), which goes through the same Struct first: the gate
    reads one type whichever way the summary came. ``data`` is the document as written (absent keys absent, the
    keys of a later minor revision kept): what ``tracekit baseline`` writes back."""

    def __init__(self, doc: SummaryDoc | Mapping[str, Any], source: str = "<summary>", data: Mapping[str, Any] | None = None):
        if not isinstance(doc, SummaryDoc):
            data = doc if data is None else data
            doc = summary_from_builtins(doc, source)
        self.doc = doc
        self._data = data  # built from the Struct on first use (a baseline of 10**6 steps held it twice)
        self.source = source
        self._steps = self._rank_steps()
        self._groups: dict[Scope, dict[tuple[int, int], list[CollectiveRow]]] = {}  # dim_stat's, per scope
        # steps before the `complete` flag read as complete (the Struct's default): every one counts
        self._left_out = {(r.rank, s.step) for r in doc.ranks for s in r.steps if not s.complete}

    @property
    def data(self) -> Mapping[str, Any]:
        """The document as written (absent keys absent); from the Struct when the summary was not read as written."""
        if self._data is None:
            self._data = to_builtins(self.doc)
        return self._data

    # -- what the data holds --------------------------------------------------------------------------------
    @property
    def warnings(self) -> list[str]:
        """The loader's and the analysis' warnings, as the summary carries them."""
        return list(self.doc.warnings)

    @property
    def steps_left_out(self) -> int:
        """Incomplete steps (``"complete": false``): no metric counts them."""
        return len(self._left_out)

    def partial_reasons(self) -> list[str]:
        return [
            f"rank {r.rank} step {s.step}: {s.partial_reason or 'incomplete'}"
            for r in self.doc.ranks
            for s in r.steps
            if not s.complete
        ]

    @property
    def lossy_steps(self) -> list[str]:
        """'rank R step S (N events)' for every step that lost events (``dropped_events`` > 0: dropped by the
        loader as unreadable or implausible): a verdict without them is not the run's."""
        return [
            f"rank {r.rank} step {s.step} ({s.dropped_events} events)"
            for r in self.doc.ranks
            for s in r.steps
            if s.dropped_events
        ]

    @property
    def truncated_ranks(self) -> list[int]:
        """Ranks whose trace file was cut short (salvaged by the loader); ``truncated`` null (summaries before the
        flag) is a whole file."""
        return [r.rank for r in self.doc.ranks if r.truncated]

    def _rows(self, r: RankSection) -> list[StepFigures] | list[Totals]:
        """What a rank's run-level metrics are taken over: its complete steps; a rank without step rows, its
        totals (a non-empty one); incomplete steps count nowhere."""
        if r.steps:
            return [s for s in r.steps if s.complete]
        return [r.totals] if float(r.totals.wall_us) > 0 else []

    @property
    def only_totals(self) -> bool:
        """No rank has step rows: the run-level figures are run totals (their basis), not per-step medians."""
        return not any(r.steps for r in self.doc.ranks)

    @property
    def has_data(self) -> bool:
        """At least one complete step on some rank (or, for a summary without step rows, a non-empty total)."""
        return any(self._rows(r) for r in self.doc.ranks)

    # -- identity -------------------------------------------------------------------------------------------
    @property
    def run(self) -> RunSection:
        return self.doc.run

    def identity(self) -> dict[str, Any]:
        """What must match for two runs to be compared: world size, layout (sizes of 1 dropped; flags such as
        sequence_parallel and names such as cp_kind kept as they are), workload, device type. A field the run
        did not record is None (the summary's null)."""
        run = self.doc.run
        try:
            recorded = ParallelLayout.from_dict(run.layout, where=f"{self.source}: run.layout")
        except LayoutError as exc:
            raise SummaryFormatError(str(exc)) from None
        layout = {k: v for k, v in recorded.items() if not (isinstance(v, int) and not isinstance(v, bool) and v == 1)}
        return {
            "world_size": run.world_size,
            "layout": dict(sorted(layout.items())),
            "workload": run.workload,
            "device_type": run.device_type,
        }

    # -- run-level metrics ----------------------------------------------------------------------------------
    def _rank_steps(self) -> dict[int, dict[int, StepFigures]]:
        return {r.rank: {s.step: s for s in r.steps if s.complete} for r in self.doc.ranks}

    def run_stat(self, metric: str) -> Stat | None:
        """None where no rank has a value: the metric is null in every row (a figure an older analyzer did not
        write), or the run has no data; the checks say so in their message."""
        per_rank = {r.rank: [self._run_value(row, metric) for row in rows] for r in self.doc.ranks if (rows := self._rows(r))}
        stat = stat_over_ranks(per_rank)
        if stat is not None and self.only_totals:
            stat = Stat(stat.median, stat.lo, stat.hi, stat.q1, stat.q3, stat.samples, "run total")
        return stat

    @staticmethod
    def _run_value(row: StepFigures | Totals, metric: str) -> float | None:
        if metric == "exposed_comm_share":
            return exposed_comm_share(row.exposed_comm_us, row.wall_us)
        if metric not in STEP_KEYS:
            raise KeyError(metric)
        v = getattr(row, metric)
        return None if v is None else float(v)

    # -- dimension/op metrics -------------------------------------------------------------------------------
    @property
    def collectives(self) -> list[CollectiveRow]:
        """Per-instance rows; none when the summary kept only the most exposed (`collectives_limit.omitted`): the
        figures then come from the complete `by_dimension` totals, never from a biased subset."""
        limit = self.doc.collectives_limit
        if limit is not None and limit.omitted > 0:
            return []
        return list(self.doc.collectives)

    @property
    def dimension_basis(self) -> str:
        """What a dimension/op figure is a median of: "per step" from the instances, "run total" from
        ``by_dimension`` (no instances listed, or only the most exposed)."""
        return "per step" if self.collectives else "run total"

    def scopes(self) -> list[Scope]:
        """Every (dimension, op) the run has, from ``collectives`` or else ``by_dimension`` ("" reads "unknown")."""
        rows: list[CollectiveRow] | list[DimensionRow] = self.collectives or self.doc.by_dimension
        pairs = {(c.dimension or "unknown", c.op or "unknown") for c in rows}
        return [Scope(d, o) for d, o in sorted(pairs)]

    def dim_stat(self, scope: Scope, metric: str) -> Stat | None:
        if not self.collectives:
            return self._dim_total(scope, metric)
        groups = self._scope_groups(scope)
        if not groups:
            return None
        has = {f: any(getattr(c, f) is not None for c in self.collectives) for f in ("wait_us", "transfer_us")}
        per_rank: dict[int, list[float | None]] = defaultdict(list)
        stepped = any(self._steps.values())  # then the (rank, step)s are the complete steps; else those with instances
        for (rank, step), rows in groups.items():
            if not stepped or step in self._steps.get(rank, {}):
                per_rank[rank].append(self._step_value(rows, metric, rank, step, has))
        # the complete steps without a collective of the scope: 0 of it ran (one value per rank for most metrics, so a
        # baseline of 10**6 steps is not 10**6 calls per metric and scope; the order of a rank's values is no matter)
        empty = None if metric == "exposed_comm_share" else self._step_value([], metric, 0, 0, has)
        for rank, steps in self._steps.items():
            missing = [step for step in steps if (rank, step) not in groups]
            if metric == "exposed_comm_share":
                per_rank[rank] += [self._step_value([], metric, rank, step, has) for step in missing]
            else:
                per_rank[rank] += [empty] * len(missing)
        return stat_over_ranks(per_rank)

    def _scope_groups(self, scope: Scope) -> dict[tuple[int, int], list[CollectiveRow]]:
        """The instances of ``scope`` in complete steps, by (rank, step): once per scope, for every metric."""
        if scope not in self._groups:
            groups: dict[tuple[int, int], list[CollectiveRow]] = defaultdict(list)
            for c in self.collectives:
                if (c.rank, c.step) not in self._left_out and scope.matches(c.dimension or "unknown", c.op or "unknown"):
                    groups[(c.rank, c.step)].append(c)
            self._groups[scope] = dict(groups)
        return self._groups[scope]

    def _step_value(self, rows: list[CollectiveRow], metric: str, rank: int, step: int, has: dict[str, bool]) -> float | None:
        """One (rank, step)'s value; a step without collectives of the scope counts 0 (nothing of it ran), a
        step without a wall time (only in the instances) gives no exposed share."""
        if metric == "count":
            return float(len(rows))
        if metric in _INSTANCE_FIELD:
            field = _INSTANCE_FIELD[metric]
            assert field is not None
            if field in has and not has[field]:
                return None
            if field == "bytes" and any(c.bytes is None for c in rows):
                return None  # a collective of unknown size: the step's bytes are unknown, not a smaller sum
            return _sum(rows, field)
        if metric == "busbw_gbps":
            vals = [float(c.busbw_gbps) for c in rows if c.busbw_gbps is not None]
            return statistics.median(vals) if vals else None
        if metric == "overlap_ratio":
            return _ratio(_sum(rows, "hidden_us"), _sum(rows, "dur_us"))
        if metric == "exposed_comm_share":
            row = self._steps.get(rank, {}).get(step)
            return exposed_comm_share(_sum(rows, "exposed_us"), None if row is None else row.wall_us)
        raise KeyError(metric)

    def _dim_total(self, scope: Scope, metric: str) -> Stat | None:
        """From ``by_dimension``: the run's totals of the scope's rows; None where a row lacks the figure
        (``wait_us`` and ``transfer_us`` of a single-rank run), a busbw over several ops (a sum of bandwidths
        means nothing), or the exposed share (no wall time per dimension)."""
        rows = [e for e in self.doc.by_dimension if scope.matches(e.dimension or "unknown", e.op or "unknown")]
        if not rows:
            return None
        value: float | None
        if metric == "overlap_ratio":
            value = _ratio(sum(float(e.hidden_comm_us) for e in rows), sum(float(e.comm_us) for e in rows))
        elif metric == "busbw_gbps":
            value = rows[0].busbw_gbps if len(rows) == 1 else None
        elif metric == "exposed_comm_share" or metric not in _DIM_FIELDS:
            value = None
        else:
            figures = [getattr(e, metric) for e in rows]
            value = None if any(v is None for v in figures) else sum(float(v) for v in figures)
        return None if value is None else Stat.single(value)

    def stat(self, metric: str, scope: Scope | None = None) -> Stat | None:
        """The Stat of ``metric`` for the whole run (scope None) or one dimension/op; None if unavailable."""
        return self.run_stat(metric) if scope is None else self.dim_stat(scope, metric)
