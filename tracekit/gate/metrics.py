"""The gate's metrics of one run (RunMetrics), read out of a `tracekit.summary/1` dict (docs/summary-schema.md):
per (rank, step) values reduced to a Stat. Run-level metrics come from ``ranks[].steps``; dimension/op metrics
from ``collectives`` (or, when a summary lists no collectives, from the run totals in ``by_dimension``)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import SummaryFormatError
from ..formats.contract import STEP_KEYS, exposed_comm_share
from ..formats.contract import SUMMARY_SCHEMA as SCHEMA
from ..model.layout import LayoutError, ParallelLayout
from .stats import Stat, stat_over_ranks

RUN_METRICS = (*STEP_KEYS, "exposed_comm_share")
DIM_METRICS = ("count", "bytes", "comm_us", "hidden_comm_us", "exposed_comm_us", "wait_us", "transfer_us",
               "busbw_gbps", "overlap_ratio", "exposed_comm_share")
RATIO_METRICS = frozenset({"overlap_ratio", "exposed_comm_share"})
# Metrics where a smaller value is the regression; for every other metric a larger one is.
LOWER_IS_WORSE = frozenset({"overlap_ratio", "busbw_gbps"})
# Collective-instance field that each summed dimension metric adds up.
_INSTANCE_FIELD = {"count": None, "bytes": "bytes", "comm_us": "dur_us", "hidden_comm_us": "hidden_us",
                   "exposed_comm_us": "exposed_us", "wait_us": "wait_us", "transfer_us": "transfer_us"}


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


def _complete(row: Mapping) -> bool:
    """A step row counts unless the analysis marked it incomplete (summaries before the flag: all count)."""
    return row.get("complete", True) is not False


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or not den:
        return None
    return float(num) / float(den)


class RunMetrics:
    """One run's metrics for the gate: a validated summary dict (``data``, the dict itself) and the look-ups
    that reduce its per-step values to a Stat."""

    def __init__(self, data: Mapping[str, Any], source: str = "<summary>"):
        schema = data.get("schema") if isinstance(data, Mapping) else None
        if schema != SCHEMA and not str(schema or "").startswith(SCHEMA + "."):
            raise SummaryFormatError(f"{source}: schema is {schema!r}, expected {SCHEMA!r}; "
                                     "write it with `tracekit baseline` or `tracekit analyze --format json`")
        if not isinstance(data.get("ranks"), list):
            raise SummaryFormatError(f"{source}: no 'ranks' list; is this a tracekit summary?")
        self.data = data
        self.source = source
        self._steps = self._rank_steps()
        self._left_out = {(int(r["rank"]), s.get("step")) for r in data["ranks"] for s in (r.get("steps") or [])
                          if not _complete(s)}

    # -- what the data holds --------------------------------------------------------------------------------
    @property
    def warnings(self) -> list[str]:
        """The loader's and the analysis' warnings, as the summary carries them."""
        return [str(w) for w in self.data.get("warnings") or []]

    @property
    def steps_left_out(self) -> int:
        """Incomplete steps (``"complete": false``): no metric counts them."""
        return len(self._left_out)

    def partial_reasons(self) -> list[str]:
        return [f"rank {r['rank']} step {s.get('step')}: {s.get('partial_reason') or 'incomplete'}"
                for r in self.data["ranks"] for s in (r.get("steps") or []) if not _complete(s)]

    @property
    def truncated_ranks(self) -> list[int]:
        """Ranks whose trace file was cut short (salvaged by the loader)."""
        return [int(r["rank"]) for r in self.data["ranks"] if r.get("truncated")]

    @property
    def has_data(self) -> bool:
        """At least one complete step on some rank (or, for a summary without step rows, a non-empty total)."""
        for r in self.data["ranks"]:
            rows = r.get("steps") or []
            if any(_complete(s) for s in rows):
                return True
            if not rows and float((r.get("totals") or {}).get("wall_us") or 0) > 0:
                return True
        return False

    # -- identity -------------------------------------------------------------------------------------------
    @property
    def run(self) -> Mapping[str, Any]:
        return self.data.get("run") or {}

    def identity(self) -> dict[str, Any]:
        """What must match for two runs to be compared: world size, layout (sizes of 1 dropped; flags such as
        sequence_parallel and names such as cp_kind kept as they are), workload, device type. Absent fields
        are None."""
        run = self.run
        try:
            recorded = ParallelLayout.from_dict(run.get("layout") or {}, where=f"{self.source}: run.layout")
        except LayoutError as exc:
            raise SummaryFormatError(str(exc)) from None
        layout = {k: v for k, v in recorded.items() if not (isinstance(v, int) and not isinstance(v, bool) and v == 1)}
        return {"world_size": run.get("world_size"), "layout": dict(sorted(layout.items())),
                "workload": run.get("workload"), "device_type": run.get("device_type")}

    # -- run-level metrics ----------------------------------------------------------------------------------
    def _rank_steps(self) -> dict[int, dict[Any, Mapping]]:
        out: dict[int, dict[Any, Mapping]] = {}
        for r in self.data["ranks"]:
            steps = {s.get("step"): s for s in (r.get("steps") or []) if _complete(s)}
            out[int(r["rank"])] = steps
        return out

    def run_stat(self, metric: str) -> Stat | None:
        per_rank: dict[int, list[float | None]] = {}
        only_totals = True
        for r in self.data["ranks"]:
            rows = r.get("steps") or []
            if rows:
                only_totals = False
                rows = [row for row in rows if _complete(row)]  # incomplete steps count nowhere
            elif float((r.get("totals") or {}).get("wall_us") or 0) > 0:
                rows = [r.get("totals") or {}]
            if rows:
                per_rank[int(r["rank"])] = [self._run_value(row, metric) for row in rows]
        stat = stat_over_ranks(per_rank)
        if stat is not None and only_totals:
            stat = Stat(stat.median, stat.lo, stat.hi, stat.q1, stat.q3, stat.samples, "run total")
        return stat

    @staticmethod
    def _run_value(row: Mapping, metric: str) -> float | None:
        if metric == "exposed_comm_share":
            return exposed_comm_share(row.get("exposed_comm_us"), row.get("wall_us"))
        v = row.get(metric)
        return None if v is None else float(v)

    # -- dimension/op metrics -------------------------------------------------------------------------------
    @property
    def collectives(self) -> list[Mapping]:
        """Per-instance rows; none when the summary kept only the most exposed (`collectives_limit.omitted`): the
        figures then come from the complete `by_dimension` totals, never from a biased subset."""
        if ((self.data.get("collectives_limit") or {}).get("omitted") or 0) > 0:
            return []
        return list(self.data.get("collectives") or [])

    def scopes(self) -> list[Scope]:
        """Every (dimension, op) the run has, from ``collectives`` or else ``by_dimension``."""
        rows = self.collectives or list(self.data.get("by_dimension") or [])
        pairs = {(str(c.get("dimension") or "unknown"), str(c.get("op") or "unknown")) for c in rows}
        return [Scope(d, o) for d, o in sorted(pairs)]

    def dim_stat(self, scope: Scope, metric: str) -> Stat | None:
        if not self.collectives:
            return self._dim_total(scope, metric)
        groups: dict[tuple[int, Any], list[Mapping]] = defaultdict(list)
        for c in self.collectives:
            if (int(c["rank"]), c.get("step")) in self._left_out:
                continue
            if scope.matches(str(c.get("dimension") or "unknown"), str(c.get("op") or "unknown")):
                groups[(int(c["rank"]), c.get("step"))].append(c)
        if not groups:
            return None
        keys = {(rank, step) for rank, steps in self._steps.items() for step in steps} or set(groups)
        has = {f: any(c.get(f) is not None for c in self.collectives) for f in ("wait_us", "transfer_us")}
        per_rank: dict[int, list[float | None]] = defaultdict(list)
        for rank, step in sorted(keys, key=lambda k: (k[0], str(k[1]))):
            per_rank[rank].append(self._step_value(groups.get((rank, step), []), metric, rank, step, has))
        return stat_over_ranks(per_rank)

    def _step_value(self, rows: list[Mapping], metric: str, rank: int, step: Any, has: dict) -> float | None:
        if metric == "count":
            return float(len(rows))
        if metric in _INSTANCE_FIELD:
            field = _INSTANCE_FIELD[metric]
            if field in has and not has[field]:
                return None
            return float(sum(float(c.get(field) or 0) for c in rows))
        if metric == "busbw_gbps":
            vals = [float(c["busbw_gbps"]) for c in rows if c.get("busbw_gbps") is not None]
            return statistics.median(vals) if vals else None
        if metric == "overlap_ratio":
            return _ratio(sum(float(c.get("hidden_us") or 0) for c in rows),
                          sum(float(c.get("dur_us") or 0) for c in rows))
        if metric == "exposed_comm_share":
            wall = (self._steps.get(rank, {}).get(step) or {}).get("wall_us")
            return exposed_comm_share(sum(float(c.get("exposed_us") or 0) for c in rows), wall)
        raise KeyError(metric)

    def _dim_total(self, scope: Scope, metric: str) -> Stat | None:
        rows = [e for e in self.data.get("by_dimension") or []
                if scope.matches(str(e.get("dimension") or "unknown"), str(e.get("op") or "unknown"))]
        if not rows:
            return None
        if metric == "overlap_ratio":
            value = _ratio(sum(float(e.get("hidden_comm_us") or 0) for e in rows),
                           sum(float(e.get("comm_us") or 0) for e in rows))
        elif metric == "busbw_gbps":
            value = rows[0].get("busbw_gbps") if len(rows) == 1 else None
        elif metric == "exposed_comm_share" or any(e.get(metric) is None for e in rows):
            value = None
        else:
            value = sum(float(e[metric]) for e in rows)
        return None if value is None else Stat.single(value)

    def stat(self, metric: str, scope: Scope | None = None) -> Stat | None:
        """The Stat of ``metric`` for the whole run (scope None) or one dimension/op; None if unavailable."""
        return self.run_stat(metric) if scope is None else self.dim_stat(scope, metric)
