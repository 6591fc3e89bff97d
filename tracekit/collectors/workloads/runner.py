"""Run a workload: spawn one process per rank on CPU (gloo), or run this rank under ``torchrun`` (NCCL on GPUs).

    result = run_workload(WorkloadConfig(workload="tp-sp", tp=2), "out/tp-sp")
    result.trace_paths, result.manifest_path

Under torchrun (``RANK`` in the environment) the same call runs this process's rank only.
"""

from __future__ import annotations

import os
import socket
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessException

from ...errors import TracekitError
from ...runtime.env import env_limit
from .. import comm, flight_recorder
from ..layout import build_groups, coords
from ..manifest import MANIFEST_NAME
from ..quiet import quiet_profiler_chatter
from . import moe
from .config import WorkloadConfig
from .delay import delays_step, host_delay, step_delay_ms
from .dp import GradSync
from .layer import Layer, Parallel, full_input, full_weights, local_positions, shard_input, shard_weights
from .profiled import run_steps
from .zero import ZeroSync


@dataclass(frozen=True, slots=True)
class RunResult:
    out_dir: Path
    trace_paths: tuple[Path, ...]
    manifest_path: Path | None
    world_size: int
    losses: tuple[float, ...]  # global loss per step
    overheads: tuple[dict, ...]  # per rank: ProfileOverhead.to_dict()
    comm_stats: tuple[dict, ...]  # per rank: {"desc|op": [count, bytes]} over the whole run
    states: tuple[dict, ...] = field(default=())  # per rank, with return_state: step-0 loss, output, grads
    activation_paths: tuple[Path, ...] = field(default=())  # activation_r{rank}.json, with activation_memory
    pipeline: tuple[dict, ...] = field(default=())  # per rank, workload pp: stage, schedule, in-flight activations

    def to_dict(self) -> dict:
        return {
            "out_dir": str(self.out_dir),
            "trace_paths": [str(p) for p in self.trace_paths],
            "manifest_path": str(self.manifest_path) if self.manifest_path else None,
            "world_size": self.world_size,
            "losses": list(self.losses),
            "overheads": list(self.overheads),
            "comm_stats": list(self.comm_stats),
            "activation_paths": [str(p) for p in self.activation_paths],
        }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_rank(cfg: WorkloadConfig, device):
    """This rank's groups, layers, input and positions."""
    lay = cfg.validate()
    groups = build_groups(lay)
    dpi, cpi, tpi = coords(lay, dist.get_rank())
    par = Parallel(lay, groups.tp, groups.cp, tpi, cpi, cfg.chunks if cfg.overlap else 1)
    if "ep" in cfg.parts:
        layers = moe.build_layers(cfg, lay, groups, par, tpi, device)
    else:
        layers = torch.nn.ModuleList(
            Layer(
                shard_weights(full_weights(cfg.hidden, i, cfg.seed), lay.tp, tpi),
                cfg.heads,
                par,
                cfg.seq,
                cfg.dropout,
                cfg.torch_dtype,
                device,
            )
            for i in range(cfg.layers)
        )
    x = shard_input(full_input(cfg.seq, cfg.batch, cfg.hidden, cfg.seed), par, lay.dp, dpi)
    return lay, groups, par, layers, x.to(device=device, dtype=cfg.torch_dtype), local_positions(cfg.seq, par, device)


def train(cfg: WorkloadConfig, out_dir, profiled: bool, return_state: bool, device) -> dict:
    if cfg.layout().pp > 1:
        from .pipeline import train_pipeline

        return train_pipeline(cfg, out_dir, profiled, return_state, device)
    lay, groups, par, layers, x, pos = build_rank(cfg, device)
    params = list(layers.parameters())
    sp_params = [getattr(m, n) for m in layers for n in Layer.LN_PARAMS] if par.sequence_parallel and lay.tp > 1 else []
    zero = (
        ZeroSync(layers, cfg.zero_stage, groups.dp, cfg.overlap, groups.tp if sp_params else None, Layer.LN_PARAMS)
        if cfg.zero_stage
        else None
    )
    if zero is not None:
        syncs: list = [zero]
    elif "ep" in cfg.parts:
        syncs = moe.grad_syncs(cfg, groups, par, layers)
    else:
        syncs = [
            GradSync(params, groups.dp, groups.tp if sp_params else None, sp_params, cfg.bucket_numel, cfg.layers, cfg.overlap)
        ]
    delay = step_delay_ms(cfg, dist.get_rank())
    norm = cfg.seq * cfg.batch * cfg.hidden
    losses: list[float] = []
    state: dict = {}

    def one_step(i: int) -> None:
        for p in params:
            p.grad = None
        if delay is not None and delays_step(i):
            host_delay(delay)
        y = x
        for layer in layers:
            y = layer(y, pos)
        loss = (y.float() ** 2).sum() / norm
        loss.backward()
        for sync in syncs:
            sync.finish()
        losses.append(float(loss.detach()))
        if i == 0 and return_state:
            grads = (
                zero.full_grads()
                if zero
                else {f"{li}.{n}": p.grad for li, m in enumerate(layers) for n, p in m.named_parameters()}
            )
            state.update(
                loss=float(loss.detach()),
                y=y.detach().float().cpu().numpy(),
                grads={k: g.float().cpu().numpy() for k, g in grads.items()},
            )
        if zero:
            zero.update(1e-3)
            return
        with torch.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-1e-3)

    overhead, traces, activation = run_steps(cfg, out_dir, profiled, one_step, layout=groups, model=layers, device=device)
    if profiled and "ep" in cfg.parts:
        moe.write_split_log(layers, out_dir, dist.get_rank())
    where = coords(lay, dist.get_rank())
    return {
        "rank": dist.get_rank(),
        "coords": where,
        "losses": losses,
        "overhead": overhead,
        "traces": traces,
        "comm": {f"{d}|{op}": list(v) for (d, op), v in comm.stats().items()},
        "state": state,
        "activation": activation,
        "replica": where[2] == 0 or par.sequence_parallel,
    }


# A rank that dies mid-run leaves its peers blocked in a collective; gloo's timeout bounds the wait.
COLLECTIVE_TIMEOUT_S = env_limit("TRACEKIT_COLLECTIVE_TIMEOUT_S", 300)  # 'abc' or -1: exit 2, not a traceback


def _pin(rank: int) -> None:
    """``TRACEKIT_PIN_CPUS=1``: rank r runs on CPU r mod n only (Linux), so that how fast a rank computes does
    not depend on whether its peers are busy or asleep at the time (an oversubscribed host otherwise hands a
    sleeping peer's core to the others)."""
    if os.environ.get("TRACEKIT_PIN_CPUS") == "1" and hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})


def _rank_main(rank, world, jobs, port, queue, profiled, return_state):
    quiet_profiler_chatter()  # Kineto's USDT lines at each profiler start/stop stay out of the run's output
    _pin(rank)
    torch.set_num_threads(1)
    comm.reset_sequences()
    if any(cfg.flight_recorder for cfg, _ in jobs):
        flight_recorder.enable()  # before the process group: torch sizes the ring when it is first used
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )
    try:
        for i, (cfg, out_dir) in enumerate(jobs):
            queue.put(dict(train(cfg, out_dir, profiled, return_state, torch.device("cpu")), job=i))
        dist.barrier()  # no rank tears gloo down while a peer's last collective is still in flight
    except BaseException:
        queue.put({"rank": rank, "error": traceback.format_exc()})
        raise
    finally:
        dist.destroy_process_group()


def _collect(items: list[dict], cfg: WorkloadConfig, out_dir: Path) -> RunResult:
    items = sorted(items, key=lambda r: r["rank"])
    steps = len(items[0]["losses"])
    losses = tuple(sum(r["losses"][i] for r in items if r["replica"]) for i in range(steps))
    manifest = out_dir / MANIFEST_NAME
    return RunResult(
        out_dir,
        tuple(Path(p) for r in items for p in r["traces"]),
        manifest if manifest.exists() else None,
        len(items),
        losses,
        tuple(r["overhead"] for r in items),
        tuple(r["comm"] for r in items),
        tuple(dict(r["state"], rank=r["rank"], coords=r["coords"]) for r in items),
        tuple(Path(r["activation"]) for r in items if r.get("activation")),
        tuple(dict(r["pipeline"], rank=r["rank"]) for r in items if r.get("pipeline")),
    )


def _drain(queue, procs, expected: int) -> list[dict]:
    """Read the ranks' results while they run (a child blocks on a full pipe until the parent reads)."""
    items: list[dict] = []
    done = False
    while len(items) < expected and not done:
        if not queue.empty():
            items.append(queue.get())
            continue
        done = procs.join(timeout=0.05)
    while not queue.empty():
        items.append(queue.get())
    while not done:
        done = procs.join()
    errors = [it["error"] for it in items if "error" in it]
    if errors or len(items) < expected:
        raise TracekitError(
            "workload run failed on a rank: "
            + (errors[0].strip().splitlines()[-1] if errors else "a rank exited without a result")
        )
    return items


def spawn_ranks(fn, head: tuple, tail: tuple, world: int, expected: int) -> list[dict]:
    """Run ``fn(rank, *head, queue, *tail)`` in ``world`` spawned processes and collect ``expected`` results.
    A rank that raises or dies (signal, exit code) is a one-line TracekitError; the others are terminated."""
    queue = mp.get_context("spawn").SimpleQueue()
    try:
        procs = mp.start_processes(fn, args=(*head, queue, *tail), nprocs=world, start_method="spawn", join=False)
        return _drain(queue, procs, expected)
    except ProcessException as exc:  # raised, or exited by a signal / non-zero code
        raise TracekitError(f"workload run failed on a rank: {str(exc).strip().splitlines()[-1]}") from None


def run_workload(config: WorkloadConfig, out_dir, *, profiled: bool = True, return_state: bool = False) -> RunResult:
    """Run ``config`` and return where its traces and manifest went. Spawns ``tp x cp x dp`` gloo processes on
    this host, unless this process is already one rank of a ``torchrun`` job (then NCCL when CUDA is there)."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        config.validate()
        return _run_torchrun(config, Path(out_dir), profiled, return_state)
    return run_batch([(config, out_dir)], profiled=profiled, return_state=return_state)[0]


def run_batch(jobs, *, profiled: bool = True, return_state: bool = False) -> list[RunResult]:
    """Run several (config, out_dir) jobs of one world size, one after the other, in one set of spawned
    processes (process start-up dominates small runs)."""
    worlds = {cfg.validate().world_size for cfg, _ in jobs}
    if len(worlds) != 1:
        raise TracekitError(f"run_batch: jobs need one world size, got {sorted(worlds)}; split the batch")
    world, port = worlds.pop(), _free_port()
    jobs = [(cfg, str(out)) for cfg, out in jobs]
    items = spawn_ranks(_rank_main, (world, jobs, port), (profiled, return_state), world, world * len(jobs))
    results = []
    for i, (cfg, out) in enumerate(jobs):
        mine = [it for it in items if it.get("job") == i]
        results.append(_collect(mine, cfg, Path(out)))
    return results


def _run_torchrun(cfg, out_dir, profiled, return_state) -> RunResult:
    quiet_profiler_chatter()
    local = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        device, backend = torch.device("cuda", local), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        if cfg.flight_recorder:
            flight_recorder.enable()
        dist.init_process_group(backend)
    item = train(cfg, out_dir, profiled, return_state, device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return _collect([item], cfg, out_dir)
