"""The profiled step loop every workload's ``train`` shares: wait/warm-up/active steps under ``tracekit.profile``,
then what the profiler wrote (overhead, trace paths, the activation-memory file)."""

from __future__ import annotations

from collections.abc import Callable

from ..profile import profile
from .config import WorkloadConfig


def run_steps(
    cfg: WorkloadConfig, out_dir, profiled: bool, one_step: Callable[[int], None], *, layout, model, device
) -> tuple[dict, list[str], str | None]:
    """Run ``one_step(i)`` for every step (under the profiler when ``profiled``, with the wait, warm-up and tail
    steps around the active ones). Returns (profiler overhead, trace paths, activation file or None)."""
    total = cfg.wait + cfg.warmup + cfg.steps + cfg.tail if profiled else cfg.steps
    if not profiled:
        for i in range(total):
            one_step(i)
        return {}, [], None
    with profile(
        out_dir,
        wait=cfg.wait,
        warmup=cfg.warmup,
        active=cfg.steps,
        layout=layout,
        model=model,
        model_dims=cfg.model_dims(device.type),
        activation_memory=cfg.activation_memory,
        workload=cfg.workload,
        profile_memory=cfg.profile_memory,
        flight_recorder=cfg.flight_recorder,
    ) as prof:
        for i in range(total):
            one_step(i)
            prof.step()
    overhead = prof.overhead.to_dict() if prof.overhead is not None else {}
    activation = prof.activation.path if prof.activation is not None else None
    return overhead, [str(p) for p in prof.trace_paths], None if activation is None else str(activation)
