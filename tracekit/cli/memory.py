"""`tracekit memory model`: the Korthikanti et al. 2022 activation-memory table, without running anything."""

from __future__ import annotations

import click

from ..analyzers.memory.activation_compare import estimate_memory
from ..analyzers.memory.activation_model import ATTENTION, CP_KINDS, DTYPE_BYTES, RECOMPUTE, MemoryConfig
from .output import emit


@click.group("memory")
def memory() -> None:
    """Activation memory: the analytical model (measurements come from `tracekit run --activation-memory`)."""


@memory.command("model")
@click.option("--seq", "-s", type=int, required=True, help="Sequence length s (the whole sequence).")
@click.option("--batch", "-b", type=int, required=True, help="Micro-batch size b.")
@click.option("--hidden", type=int, required=True, help="Hidden size h.")
@click.option("--heads", "-a", type=int, required=True, help="Attention heads a.")
@click.option("--tp", "-t", type=int, default=1, show_default=True, help="Tensor-parallel size t.")
@click.option("--cp", type=int, default=1, show_default=True, help="Context-parallel size (sequence / cp).")
@click.option("--cp-kind", type=click.Choice(CP_KINDS), default="ring", show_default=True)
@click.option("--sp", is_flag=True, help="Megatron sequence parallelism (with --tp).")
@click.option("--recompute", type=click.Choice(RECOMPUTE), default="none", show_default=True)
@click.option(
    "--attention",
    type=click.Choice(ATTENTION),
    default="standard",
    show_default=True,
    help="fused: a flash-style kernel that saves no s² term.",
)
@click.option("--dtype", type=click.Choice(sorted(DTYPE_BYTES)), default="bf16", show_default=True)
@click.option("--no-dropout", is_flag=True, help="No dropout: no masks.")
@click.option(
    "--ln-stats-bytes",
    type=int,
    default=0,
    show_default=True,
    help="Add LayerNorm mean/rstd at this width (2 = bf16 on CPU, 4 = fp32 on CUDA).",
)
@click.option("--layers", "-L", type=int, default=1, show_default=True, help="Layers, for the total.")
@click.option("--vocab", type=int, default=0, help="Vocabulary size: adds the embedding/output terms (4.3).")
@click.option("--tensors", is_flag=True, help="Also list every saved tensor (the bill of materials).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def model(
    seq,
    batch,
    hidden,
    heads,
    tp,
    cp,
    cp_kind,
    sp,
    recompute,
    attention,
    dtype,
    no_dropout,
    ln_stats_bytes,
    layers,
    vocab,
    tensors,
    fmt,
) -> None:
    """Print the per-layer activation memory of one rank (arXiv:2205.05198, Table 2)."""
    cfg = MemoryConfig(
        seq,
        batch,
        hidden,
        heads,
        tp=tp,
        cp=cp,
        sp=sp,
        cp_kind=cp_kind,
        recompute=recompute,
        attention=attention,
        bytes_per_element=DTYPE_BYTES[dtype],
        dropout=not no_dropout,
        layernorm_stat_bytes=ln_stats_bytes,
    )
    emit(estimate_memory(cfg, layers, vocab, tensors), fmt, indent=2)


@memory.command("timeline")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--points",
    type=click.IntRange(3, 10**6),
    default=1000,
    show_default=True,
    help="Points of the curve kept in the JSON (the maximum and the last of each bucket).",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def timeline(path, points, fmt) -> None:
    """Read torch.profiler's raw memory timeline (export_memory_timeline("x.raw.json.gz")): its peak and the
    bytes of each category (parameter, activation, gradient, ...) at the peak."""
    from .. import units
    from ..analyzers.memory.timeline_export import read_export_timeline
    from ..formats import core

    tl = read_export_timeline(path, points)
    if fmt == "json":
        click.echo(core.dumps(tl.to_dict()))
        return
    click.echo(
        f"{tl.events} events, {len(tl.t_us)} timestamps; before profiling {units.size(tl.preexisting_bytes)}; "
        f"peak {units.size(tl.peak_bytes)} at {units.duration(tl.t_us[tl.peak] - tl.t_us[0])} from the start"
    )
    for cat, nbytes in sorted(tl.category_bytes_at_peak().items(), key=lambda kv: -kv[1]):
        click.echo(f"  {cat:<16} {units.size(nbytes):>12}  {units.percent(nbytes / tl.peak_bytes if tl.peak_bytes else None)}")
