"""`tracekit run`: run a reference workload, profile it, and print where the traces went."""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from ..collectors.workloads.config import DTYPES, WorkloadConfig


@click.command()
@click.option("--workload", default="tp-sp", show_default=True,
              help="tp, tp-sp, cp-ring, ulysses, dp, or a combination joined by '+' (tp-sp+cp-ring).")
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree (default 2 if the workload names tp).")
@click.option("--cp", type=int, default=None, help="Context-parallel degree, for cp-ring and ulysses.")
@click.option("--dp", type=int, default=None, help="Data-parallel degree.")
@click.option("--layers", type=int, default=2, show_default=True)
@click.option("--seq", type=int, default=64, show_default=True)
@click.option("--hidden", type=int, default=64, show_default=True)
@click.option("--heads", type=int, default=8, show_default=True)
@click.option("--batch", type=int, default=2, show_default=True)
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default="fp32", show_default=True)
@click.option("--overlap/--no-overlap", default=False, show_default=True,
              help="Chunked/async collectives scheduled under independent compute.")
@click.option("--steps", type=int, default=3, show_default=True, help="Profiled steps.")
@click.option("--activation-memory", is_flag=True,
              help="Record the bytes each layer saves for backward (activation_r{rank}.json) and compare them "
                   "with the Korthikanti et al. model in the summary.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
def run(workload, tp, cp, dp, layers, seq, hidden, heads, batch, dtype, overlap, steps, activation_memory,
        out_dir):
    """Run a reference workload on CPU (gloo, one spawned process per rank) or under torchrun, and profile it."""
    from ..collectors.workloads.runner import run_workload

    cfg = WorkloadConfig(workload=workload, tp=tp, cp=cp, dp=dp, layers=layers, seq=seq, hidden=hidden,
                         heads=heads, batch=batch, dtype=dtype, overlap=overlap, steps=steps,
                         activation_memory=activation_memory)
    lay = cfg.validate()
    click.echo(f"tracekit run: {workload} on {lay.world_size} processes (tp{lay.tp} cp{lay.cp} dp{lay.dp}"
               f"{', overlap' if overlap else ''})")
    result = run_workload(cfg, out_dir)
    rank = int(os.environ.get("RANK", "0"))  # under torchrun every rank runs this command
    if rank != 0:
        click.echo(f"rank {rank}: trace written to {result.out_dir}; rank 0 prints the summary")
        return
    paths = _wait_for_traces(Path(result.out_dir), lay.world_size) if "RANK" in os.environ else result.trace_paths
    click.echo(f"traces: {len(paths)} in {result.out_dir}")
    for path in paths:
        click.echo(f"  {path}")
    click.echo(f"manifest: {result.manifest_path}")
    click.echo(summary(result, cfg))


def _wait_for_traces(out_dir: Path, world: int, timeout_s: float = 300.0) -> list[Path]:
    """Under torchrun, rank 0 summarises once every rank's trace is in place (each is renamed into place
    only when complete)."""
    want = [out_dir / f"rank{r}.trace.json.gz" for r in range(world)]
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in want) and time.monotonic() < deadline:
        time.sleep(0.2)
    missing = [p.name for p in want if not p.exists()]
    if missing:
        click.echo(f"tracekit run: warning: no trace from {', '.join(missing)} after {timeout_s:.0f} s; "
                   "summarising the ranks that wrote one", err=True)
    return [p for p in want if p.exists()]


def summary(result, cfg) -> str:
    """One screen: the loss, the collectives issued per step by dimension, the profiler's overhead, and the
    analyzer's verdict when the analyzers are installed."""
    steps = len(result.losses)
    lines = [f"loss: first {result.losses[0]:.4f}, last {result.losses[-1]:.4f} over {steps} steps", "",
             f"{'dimension':<10} {'op':<15} {'per step':>9} {'MiB/step':>9}   (rank 0)"]
    for key, (count, nbytes) in sorted(result.comm_stats[0].items()):
        desc, op = key.split("|")
        lines.append(f"{desc.removeprefix('tracekit:'):<10} {op:<15} {count / steps:>9.1f} "
                     f"{nbytes / steps / 2**20:>9.3f}")
    over = result.overheads[0]
    if over:
        lines += ["", f"profiler overhead (rank 0): {over['overhead_per_step_ns'] / 1e6:+.2f} ms per recorded step "
                      f"(step {over['unprofiled_step_ns'] / 1e6:.2f} ms unprofiled), "
                      f"{over['profiler_calls_ns'] / 1e6:.0f} ms in start/stop/export"]
    if result.activation_paths:
        lines += ["", *activation_lines(result.out_dir)]
    lines.append(_analysis(result))
    return "\n".join(lines)


def activation_lines(out_dir) -> list[str]:
    """Measured saved bytes per layer against the model, rank by rank (the last step)."""
    from ..analyzers.memory_run import activation_from_dir

    comparison, warnings = activation_from_dir(out_dir)
    if comparison is None:
        return [f"activation memory: {w}" for w in warnings] or ["activation memory: nothing recorded"]
    model = comparison.model
    lines = [f"activation memory per layer (model {model.name}: {model.formula}, paper {model.paper_bytes:,} B"
             f" + LayerNorm statistics {model.layernorm_stats_bytes:,} B)",
             f"{'rank':>4} {'layer':>5} {'measured B':>12} {'model B':>12} {'delta B':>9}"]
    for row in comparison.layers:
        lines.append(f"{row.rank if row.rank is not None else '-':>4} {row.layer:>5} {row.measured_bytes:>12,} "
                     f"{row.model_bytes:>12,} {row.delta_bytes:>+9,}")
    return lines + [f"activation memory: {w}" for w in warnings]


def _analysis(result) -> str:
    """The analyzer's headline for the run just recorded (the full view: `tracekit analyze OUT`)."""
    from ..reports.view import fmt_ratio, fmt_us
    from ._analysis import analysis_from_traces

    summary = analysis_from_traces([str(result.out_dir)], executor="serial").to_dict()
    lines = ["", f"{'rank':<5} {'wall/step':>11} {'comm':>11} {'hidden':>11} {'exposed':>11} {'overlap':>8}"]
    for r in summary["ranks"]:
        t, n = r["totals"], max(len(r["steps"]), 1)
        lines.append(f"{r['rank']:<5} {fmt_us(t['wall_us'] / n):>11} {fmt_us(t['comm_us'] / n):>11} "
                     f"{fmt_us(t['hidden_comm_us'] / n):>11} {fmt_us(t['exposed_comm_us'] / n):>11} "
                     f"{fmt_ratio(t['overlap_ratio']):>8}")
    lines.append(f"(per step; details: tracekit analyze {result.out_dir})")
    return "\n".join(lines)
