"""Rank functions for the fault tests (module level, so spawned processes can import them)."""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

import tracekit


def dies_mid_run(rank, world, port, out_dir, queue, die_at):
    """Each rank trains under tracekit.profile with an all-reduce per step; rank 1 dies at step ``die_at``.
    Rank 0 reports what happened to it: the exception that ended its loop, its traces and problems."""
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=timedelta(seconds=4)
    )
    w = torch.randn(16, 16, requires_grad=True)
    result = {"rank": rank, "steps": 0, "error": None}
    try:
        with tracekit.profile(out_dir, wait=0, warmup=1, active=6) as p:
            for i in range(8):
                if rank == 1 and i == die_at:
                    os._exit(17)  # killed: no cleanup, no goodbye to the peer
                g = (torch.randn(8, 16) @ w).sum()
                g.backward()
                dist.all_reduce(w.grad)
                result["steps"] += 1
                p.step()
    except RuntimeError as exc:  # the collective timed out: the training loop sees the failure
        result["error"] = str(exc).splitlines()[0]
    result.update(traces=[str(t) for t in p.trace_paths], problems=list(p.problems))
    queue.put(result)


def exits(rank, queue, code):
    """Rank 1 exits with ``code`` at once; rank 0 would wait forever for a result that never comes."""
    if rank == 1:
        os._exit(code)
    import time

    time.sleep(600)
