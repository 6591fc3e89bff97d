"""Single-rank breakdowns (issue #18): kernels by name and class, the exclusive busy partition, idle time and its
causes, launch statistics. ``breakdowns(traces)`` returns one frozen ``RankBreakdowns`` per rank; its ``to_dict()``
holds the summary sections that sit beside a rank's ``totals`` (``kernel_breakdown``, ``kernel_classes``,
``busy_partition``, ``idle_breakdown``, ``launch_stats``) and each table is also a DataFrame (``*_frame``) with
the JSON's column names. On CPU-only runs the device breakdowns say ``{"available": false, "reason": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import pandas as pd

from ...model.traceset import TraceSet
from .device_scope import scope
from .idle import IdleBreakdown, idle_breakdown
from .kernel_classes import ClassRuleSet
from .kernels import BusyPartition, KernelBreakdown, Unavailable, kernel_breakdown
from .launches import LaunchStats, launch_stats

CPU_ONLY = (
    "CPU-only run: no device activity in the trace (gloo); device kernels, busy time, device idle time and "
    "kernel launches do not exist"
)
NO_LAUNCHES = (
    "no runtime launch rows (cuda_runtime / cuda_driver with a correlation id) match the device "
    "activities; was the CPU activity traced?"
)


@dataclass(frozen=True, slots=True)
class BreakdownOptions:
    steps: tuple[int, ...] | None = None  # ProfilerStep numbers; None = every step (the whole trace without steps)
    class_rules: ClassRuleSet = field(default_factory=ClassRuleSet)
    dependency_slack_ns: int = 5_000
    host_bound_share: float = 0.5
    delay_cutoff_ns: int = 100_000
    runtime_cutoff_ns: int = 50_000
    max_outliers: int = 20
    window: str | None = None  # as analyze(window=...): an annotation whose instances are the steps
    # rank -> the comm analyzer's StepPlan, set by analyze(): the tables are already re-stepped with it, so the
    # breakdowns take the analysis' windows as they are instead of planning the steps a second time
    plans: Mapping[int, Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True, eq=False)
class RankBreakdowns:
    rank: int
    device_type: str
    kernels: KernelBreakdown | Unavailable
    busy: BusyPartition | Unavailable
    idle: IdleBreakdown | Unavailable
    launches: LaunchStats | Unavailable

    def __repr__(self) -> str:  # which breakdowns the rank has; their rows are in the *_frame() accessors
        parts = {"kernels": self.kernels, "busy": self.busy, "idle": self.idle, "launches": self.launches}
        have = ", ".join(k if not isinstance(v, Unavailable) else f"{k}: n/a" for k, v in parts.items())
        return f"RankBreakdowns(rank {self.rank}, {self.device_type}: {have})"

    def to_dict(self) -> dict:
        k = self.kernels
        return {
            "kernel_breakdown": k.to_dict(),
            "kernel_classes": [c.to_dict() for c in k.classes] if isinstance(k, KernelBreakdown) else k.to_dict(),
            "busy_partition": self.busy.to_dict(),
            "idle_breakdown": self.idle.to_dict(),
            "launch_stats": self.launches.to_dict(),
        }

    # one accessor per table, the JSON's column names
    def kernel_frame(self, by: str = "name") -> pd.DataFrame:
        """``by``: "name" (kernel_breakdown), "class" (kernel_classes) or "short_name"."""
        return self.kernels.to_frame(by) if isinstance(self.kernels, KernelBreakdown) else self.kernels.to_frame()

    def busy_frame(self) -> pd.DataFrame:
        return self.busy.to_frame()

    def idle_frame(self, by: str = "step") -> pd.DataFrame:
        """``by``: "step" (idle_breakdown.steps), "stream" (idle_breakdown.streams) or "stream_step"."""
        return self.idle.to_frame(by) if isinstance(self.idle, IdleBreakdown) else self.idle.to_frame()

    def launch_frame(self) -> pd.DataFrame:
        """One row per launched device activity (launch_stats' per-kernel table)."""
        return self.launches.to_frame()

    def outlier_frame(self) -> pd.DataFrame:
        """launch_stats.outliers."""
        return self.launches.outliers() if isinstance(self.launches, LaunchStats) else self.launches.to_frame()


def rank_breakdowns(traces: TraceSet, rank: int, options: BreakdownOptions) -> RankBreakdowns:
    info = traces.info(rank)
    if info.device_type == "cpu":
        na = Unavailable(CPU_ONLY)
        return RankBreakdowns(rank, info.device_type, na, na, na, na)
    plan = options.plans.get(rank) if options.plans else None
    sc = scope(traces.table(rank), options.steps, info, options.window, plan)
    kernels, busy = kernel_breakdown(sc, rank, options.class_rules)
    idle = idle_breakdown(sc, rank, options.dependency_slack_ns, options.host_bound_share)
    launches = launch_stats(
        sc, rank, options.class_rules, options.delay_cutoff_ns, options.runtime_cutoff_ns, options.max_outliers
    )
    return RankBreakdowns(
        rank, info.device_type, kernels, busy, idle, launches if launches is not None else Unavailable(NO_LAUNCHES)
    )


def breakdowns(traces: TraceSet, options: BreakdownOptions | None = None) -> dict[int, RankBreakdowns]:
    """Per rank, the single-rank breakdowns of the step range ``options.steps``."""
    options = options or BreakdownOptions()
    return {r: rank_breakdowns(traces, r, options) for r in traces.ranks}


class BreakdownAnalyzer:
    """The Analyzer protocol (analyzers/registry.py): per rank, the breakdowns of the steps the analysis resolved
    (``steps``: the re-stepped tables and their plans); alone, of the steps it plans itself."""

    name: ClassVar[str] = "breakdowns"
    Options: ClassVar[type] = BreakdownOptions
    needs: ClassVar[tuple[str, ...]] = ("steps",)

    def run(self, traces: TraceSet, options: BreakdownOptions, inputs: Mapping = {}) -> dict[int, RankBreakdowns]:
        if "steps" in inputs:
            traces, options = inputs["steps"].traces, replace(options, plans=inputs["steps"].plans)
        return breakdowns(traces, options)
