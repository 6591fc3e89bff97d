"""``tracekit run --delay RANK:MS``: a straggler with a known cause, for every workload's step loop.

delay = step_delay_ms(cfg, dist.get_rank())   # None on every other rank
...at the start of each step, before its collectives:
if delay is not None:
    host_delay(delay)
"""

from __future__ import annotations

import os
import time

from torch.profiler import record_function


def step_delay_ms(cfg, rank: int) -> float | None:
    """The milliseconds ``rank`` sleeps per step under ``cfg.delay`` ("RANK:MS"), or None."""
    spec = cfg.delay_spec
    return spec[1] if spec is not None and spec[0] == rank else None


def delays_step(i: int) -> bool:
    """Whether step ``i`` (counted from 0, wait and warm-up steps included) is delayed: every step, or with
    ``TRACEKIT_DELAY_EVERY=N`` only every N-th (i % N == N - 1). benchmarks/straggler.py --alternate uses N=2:
    delayed and undelayed steps of one run, adjacent in time, under the same host load."""
    every = int(os.environ.get("TRACEKIT_DELAY_EVERY", "1") or 1)
    return every <= 1 or i % every == every - 1


def host_delay(ms: float) -> None:
    """Real host time in a ``tracekit:delay`` annotation, before any of the step's collectives: what the wait,
    critical-path and what-if analyses should recover (no operator covers it: a host gap inside the annotation)."""
    with record_function("tracekit:delay"):
        time.sleep(ms / 1e3)
