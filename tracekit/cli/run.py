"""`tracekit run`: run a reference workload, profile it, and print where the traces went."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import click

from ..collectors.workload_catalog import WORKLOAD_HELP, WORKLOADS
from ..model.dtypes import WORKLOAD_TORCH_NAMES
from .output import emit


def _workloads_epilog() -> str:
    """One line per workload, from the config's table (click keeps a paragraph after \b as written)."""
    width = max(map(len, WORKLOADS))
    lines = [f"  {w:<{width}}  {WORKLOAD_HELP.get(w, '')}" for w in WORKLOADS]
    return "\b\nWorkloads (combine with '+', e.g. tp-sp+cp-ring, tp-sp+zero3):\n" + "\n".join(lines)


@click.command(epilog=_workloads_epilog())
@click.option(
    "--workload",
    default="tp-sp",
    show_default=True,
    help="A workload listed below, or a combination joined by '+' (tp-sp+cp-ring).",
)
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree (default 2 if the workload names tp).")
@click.option("--cp", type=int, default=None, help="Context-parallel degree, for cp-ring and ulysses.")
@click.option("--dp", type=int, default=None, help="Data-parallel degree.")
@click.option(
    "--pp",
    type=int,
    default=None,
    help="pp: pipeline stages over the layers, 1F1B over --microbatches, activations sent stage to stage.",
)
@click.option(
    "--microbatches",
    type=int,
    default=None,
    help="Microbatches per step, for pp (default: the most, up to 4, that divide the batch per dp rank).",
)
@click.option(
    "--ep", type=int, default=None, help="Expert-parallel degree, for ep (default 2; carved out of dp x cp, dp grows to hold it)."
)
@click.option("--experts", type=int, default=4, show_default=True, help="Experts per MoE layer, for ep.")
@click.option("--top-k", type=int, default=2, show_default=True, help="Experts per token, for ep.")
@click.option(
    "--capacity-factor",
    type=float,
    default=1.25,
    show_default=True,
    help="For ep: an expert takes at most ceil(factor x tokens x top-k / experts) of a rank's tokens.",
)
@click.option("--layers", type=int, default=2, show_default=True)
@click.option("--seq", type=int, default=64, show_default=True)
@click.option("--hidden", type=int, default=64, show_default=True)
@click.option("--heads", type=int, default=8, show_default=True)
@click.option(
    "--batch",
    type=int,
    default=None,
    help="Global batch (default: --microbatches x the dp degree when --microbatches is given, else 2).",
)
@click.option("--dtype", type=click.Choice(sorted(WORKLOAD_TORCH_NAMES)), default="fp32", show_default=True)
@click.option(
    "--overlap/--no-overlap",
    default=False,
    show_default=True,
    help="Chunked/async collectives scheduled under independent compute.",
)
@click.option("--steps", type=int, default=3, show_default=True, help="Profiled steps.")
@click.option(
    "--activation-memory",
    is_flag=True,
    help="Record the bytes each layer saves for backward (activation_r{rank}.json) and compare them "
    "with the Korthikanti et al. model in the summary.",
)
@click.option(
    "--profile-memory",
    is_flag=True,
    help="Record every allocation and free ([memory] events): the summary's memory timeline per device.",
)
@click.option(
    "--delay",
    metavar="RANK:MS",
    default=None,
    help="Rank RANK sleeps MS ms per step inside record_function('tracekit:delay'), before its "
    "collectives: a straggler with a known cause.",
)
@click.option(
    "--flight-recorder",
    is_flag=True,
    help="Also dump every rank's Flight Recorder ring (_dump_<rank>) beside its trace, at the end and on a failure: "
    "for `tracekit hang` and `tracekit analyze`.",
)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--verbose", is_flag=True, help="Let the profiler's own log lines (Kineto's USDT/STAGE) through.")
def run(
    workload,
    tp,
    cp,
    dp,
    pp,
    microbatches,
    ep,
    experts,
    top_k,
    capacity_factor,
    layers,
    seq,
    hidden,
    heads,
    batch,
    dtype,
    overlap,
    steps,
    activation_memory,
    out_dir,
    delay=None,
    profile_memory=False,
    verbose=False,
    flight_recorder=False,
):
    """Run a reference workload on CPU (gloo, one spawned process per rank) or under torchrun, and profile it."""
    from ..collectors.need_torch import require_torch

    require_torch("tracekit run")
    from ..collectors.workloads.config import WorkloadConfig
    from ..collectors.workloads.runner import run_workload
    from ..runtime.env import check_env
    from .progress import progress

    if verbose:
        os.environ["TRACEKIT_VERBOSE"] = "1"  # read by the spawned ranks (collectors/quiet.py)

    cfg = WorkloadConfig(
        workload=workload,
        tp=tp,
        cp=cp,
        dp=dp,
        layers=layers,
        seq=seq,
        hidden=hidden,
        heads=heads,
        batch=2 if batch is None else batch,
        dtype=dtype,
        overlap=overlap,
        steps=steps,
        activation_memory=activation_memory,
        pp=pp,
        microbatches=1 if microbatches is None else microbatches,
        profile_memory=profile_memory,
        ep=ep,
        experts=experts,
        top_k=top_k,
        capacity_factor=capacity_factor,
        delay=delay,
        flight_recorder=flight_recorder,
    )
    if batch is None and microbatches is not None:  # a default follows the flags given: one sample per microbatch
        cfg = replace(cfg, batch=microbatches * cfg.layout().dp)
    if microbatches is None:
        per_dp = max(cfg.batch // cfg.layout().dp, 1)
        cfg = replace(cfg, microbatches=max(m for m in range(1, 5) if per_dp % m == 0))
        microbatches = cfg.microbatches
    check_env()  # TRACEKIT_COLLECTIVE_TIMEOUT_S, read when the runner was imported just now
    lay = cfg.validate()
    click.echo(
        f"tracekit run: {workload} on {lay.world_size} processes (tp{lay.tp} cp{lay.cp} dp{lay.dp}"
        f"{f' pp{lay.pp} x {microbatches} microbatches' if lay.pp > 1 else ''}"
        f"{f' ep{lay.ep}' if lay.ep > 1 else ''}{', overlap' if overlap else ''})"
    )
    with progress(f"running {lay.world_size} ranks"):
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
    if flight_recorder:
        click.echo(f"flight recorder dumps: {len(list(Path(result.out_dir).glob('_dump_*')))} in {result.out_dir}")
    emit(digest(result), "text")


def _wait_for_traces(out_dir: Path, world: int, timeout_s: float = 300.0) -> list[Path]:
    """Under torchrun, rank 0 summarises once every rank's trace is in place (each is renamed into place
    only when complete)."""
    want = [out_dir / f"rank{r}.trace.json.gz" for r in range(world)]
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in want) and time.monotonic() < deadline:
        time.sleep(0.2)
    missing = [p.name for p in want if not p.exists()]
    if missing:
        click.echo(
            f"tracekit run: warning: no trace from {', '.join(missing)} after {timeout_s:.0f} s; "
            "summarising the ranks that wrote one",
            err=True,
        )
    return [p for p in want if p.exists()]


def digest(result):
    """What `tracekit run` shows about the run just recorded: the runner's result, the activation memory
    against the model (when recorded) and the analysis of the traces."""
    from ..analyzers.memory.activation_run import activation_from_dir
    from ..collectors.workloads.bubble import stage_bubbles
    from ..reports.workload import WorkloadDigest
    from ._analysis import analysis_from_traces

    comparison, warnings = activation_from_dir(result.out_dir) if result.activation_paths else (None, ())
    from .progress import progress

    with progress("loading and analysing the traces"):
        summary = analysis_from_traces([str(result.out_dir)], executor="serial").to_dict()
    return WorkloadDigest(result, summary, comparison, warnings, bool(result.activation_paths), stage_bubbles(summary))
