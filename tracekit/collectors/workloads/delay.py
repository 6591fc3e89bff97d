"""``tracekit run --delay RANK:MS``: a straggler with a known cause, for every workload's step loop.

    delay = step_delay_ms(cfg, dist.get_rank())   # None on every other rank
    ...at the start of each step, before its collectives:
    if delay is not None:
        host_delay(delay)
"""

from __future__ import annotations

import time

from torch.profiler import record_function


def step_delay_ms(cfg, rank: int) -> float | None:
    """The milliseconds ``rank`` sleeps per step under ``cfg.delay`` ("RANK:MS"), or None."""
    spec = cfg.delay_spec
    return spec[1] if spec is not None and spec[0] == rank else None


def host_delay(ms: float) -> None:
    """Real host time in a ``tracekit:delay`` annotation, before any of the step's collectives: what the wait,
    critical-path and what-if analyses should recover (no operator covers it: a host gap inside the annotation)."""
    with record_function("tracekit:delay"):
        time.sleep(ms / 1e3)
