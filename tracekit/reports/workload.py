"""`tracekit run` on the terminal: one screen about the run just recorded: the loss, the collectives issued per
step by dimension, the profiler's overhead, activation memory against the model, and the analyzer's verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from .. import units
from ..analyzers.memory.activation_compare import ActivationComparison
from .base import StreamReporter
from .memory import comparison_lines


@dataclass(frozen=True, slots=True)
class WorkloadDigest:
    """What `tracekit run` shows: the runner's RunResult (tracekit.collectors.workloads.runner), the activation
    memory comparison when the run recorded it, and the run's ``tracekit.summary/1``."""

    run: Any  # RunResult (typed loosely: importing the runner imports torch)
    summary: Mapping[str, Any]
    activation: ActivationComparison | None = None
    activation_warnings: tuple[str, ...] = ()
    activation_recorded: bool = False
    bubbles: tuple = ()  # StageBubble per pipeline stage (tracekit.collectors.workloads.bubble), workload pp


class WorkloadText(StreamReporter):
    format = "text"
    document = WorkloadDigest

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        stream.write("\n".join([*_run_lines(doc.run), *_activation(doc), *_pipeline_lines(doc), *_analysis_lines(doc)]) + "\n")
        return ()


def _run_lines(result: Any) -> list[str]:
    steps = len(result.losses)
    lines = [
        f"loss: first {result.losses[0]:.4f}, last {result.losses[-1]:.4f} over {steps} steps",
        "",
        f"{'dimension':<10} {'op':<15} {'per step':>9} {'MiB/step':>9}   (rank 0)",
    ]
    for key, (count, nbytes) in sorted(result.comm_stats[0].items()):
        desc, op = key.split("|")
        lines.append(f"{desc.removeprefix('tracekit:'):<10} {op:<15} {count / steps:>9.1f} {nbytes / steps / 2**20:>9.3f}")
    over = result.overheads[0]
    if over:
        from .explain import profiler_overhead

        text = profiler_overhead({"run": {"manifest": {"profiler_overhead": over}}})
        lines += ["", f"profiler overhead: {text}"] if text else []
    return lines


def _activation(doc: WorkloadDigest) -> list[str]:
    if not doc.activation_recorded:
        return []
    return ["", *comparison_lines(doc.activation, doc.activation_warnings)]


def _pipeline_lines(doc: WorkloadDigest) -> list[str]:
    """Workload pp: each stage's bubble against (p-1)/(m+p-1) and its peak in-flight activations against p-s."""
    if not doc.bubbles:
        return []
    held = {p["stage"]: p for p in getattr(doc.run, "pipeline", ()) if "peak_in_flight" in p}
    lines = [
        "",
        f"{'stage':<6} {'bubble':>8} {'1F1B':>8} {'delta':>8} {'range':>15}"
        + ("   in flight (model)  held at peak" if held else ""),
    ]
    for b in doc.bubbles:
        row = (
            f"{b.stage:<6} {units.percent(b.measured):>8} {units.percent(b.analytical):>8} "
            f"{units.signed_percent(b.delta):>8} {units.percent(b.lowest):>7}-{units.percent(b.highest):<7}"
        )
        if b.stage in held:
            h = held[b.stage]
            row += f"   {h['peak_in_flight']:>2} ({h['model_in_flight']:>2})        {units.size(h['peak_in_flight_bytes'])}"
        lines.append(row)
    lines.append("(bubble: 1 - compute / wall of the stage's steps; 1F1B: (p-1)/(m+p-1))")
    if held:
        lines.append(
            "(in flight: microbatches whose activations a stage held at once, 1F1B model p-s; the per-layer "
            "table above sums each layer over the step's microbatches: the model at the rank's whole batch)"
        )
    return lines


def _analysis_lines(doc: WorkloadDigest) -> list[str]:
    """The analyzer's headline for the run (the full view: `tracekit analyze OUT`)."""
    lines = ["", f"{'rank':<5} {'wall/step':>11} {'comm':>11} {'hidden':>11} {'exposed':>11} {'overlap':>8}"]
    for r in doc.summary["ranks"]:
        t, n = r["totals"], max(len(r["steps"]), 1)
        lines.append(
            f"{r['rank']:<5} {units.duration(t['wall_us'] / n):>11} {units.duration(t['comm_us'] / n):>11} "
            f"{units.duration(t['hidden_comm_us'] / n):>11} {units.duration(t['exposed_comm_us'] / n):>11} "
            f"{units.percent(t['overlap_ratio']):>8}"
        )
    lines.append(f"(per step; details: tracekit analyze {doc.run.out_dir})")
    return lines
