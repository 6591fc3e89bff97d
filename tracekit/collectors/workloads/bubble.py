"""The pipeline bubble of a run, measured from its ``tracekit.summary/1`` and held against the 1F1B schedule.

With p stages, m microbatches and equal work per microbatch, a 1F1B step lasts (m + p - 1) microbatch slots and
each stage computes in m of them, so every stage idles (p - 1) / (m + p - 1) of the step (Narayanan et al.
2021, arXiv:2104.04473, section 2.2). Measured: per rank and complete step, 1 - compute / wall, where compute is
the analyzer's K (on CPU each thread's operators minus the time it is blocked in communication) and wall the
step window; a stage's figure is the median over its ranks and steps (a step in which another process took the
core does not move it), with the lowest and highest beside it. The gap to the analytical figure is the
host's own overhead between operators plus communication the schedule's model takes as free.

Ranks map to stages as the pp workload lays them out: stage = rank // (world_size / pp). Imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median
from typing import Any


@dataclass(frozen=True, slots=True)
class StageBubble:
    stage: int
    ranks: tuple[int, ...]
    steps: int  # complete steps measured, over all the stage's ranks
    measured: float  # median idle share of the step on the stage's compute threads
    lowest: float
    highest: float
    analytical: float  # (p - 1) / (m + p - 1)

    @property
    def delta(self) -> float:
        return self.measured - self.analytical

    def to_dict(self) -> dict:
        return {
            "stage": self.stage,
            "ranks": list(self.ranks),
            "steps": self.steps,
            "measured": self.measured,
            "lowest": self.lowest,
            "highest": self.highest,
            "analytical": self.analytical,
            "delta": self.delta,
        }


def analytical_bubble(stages: int, microbatches: int) -> float:
    """The 1F1B (and GPipe) bubble share of a step: (p - 1) / (m + p - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def pipeline_shape(summary: Mapping[str, Any]) -> tuple[int, int] | None:
    """(stages, microbatches) recorded in the summary's run manifest; None for a run without a pipeline."""
    run = summary.get("run", {})
    pp = run.get("layout", {}).get("pp", 1)
    m = run.get("manifest", {}).get("model", {}).get("microbatches")
    if not isinstance(pp, int) or pp <= 1 or not isinstance(m, int) or m < 1:
        return None
    return pp, m


def stage_bubbles(summary: Mapping[str, Any]) -> tuple[StageBubble, ...]:
    """Measured and analytical bubble per stage; empty when the run recorded no pipeline."""
    shape = pipeline_shape(summary)
    if shape is None:
        return ()
    pp, m = shape
    width = max(int(summary["run"].get("world_size", len(summary["ranks"]))) // pp, 1)
    shares: dict[int, list[float]] = {}
    ranks: dict[int, list[int]] = {}
    for r in summary["ranks"]:
        stage = int(r["rank"]) // width
        ranks.setdefault(stage, []).append(int(r["rank"]))
        for step in r["steps"]:
            if step.get("complete", True) and step["wall_us"] > 0:
                shares.setdefault(stage, []).append(1.0 - step["compute_us"] / step["wall_us"])
    want = analytical_bubble(pp, m)
    return tuple(StageBubble(s, tuple(ranks[s]), len(v), median(v), min(v), max(v), want) for s, v in sorted(shares.items()) if v)
