"""A gloo all-gather left in flight across ``p.step()`` (prefetch of the next step's parameters) under
``tracekit.profile``: both ranks finish, every cycle's trace is written and loads, and with the Work handles
released before ``destroy_process_group()`` the processes exit cleanly. Without that release torch 2.13 may abort
the process at interpreter exit (pytorch/pytorch#190489; tests/collectors/inflight_gloo.py measures how often).
Real processes, real gloo, in subprocesses so an abort cannot take pytest down."""

from __future__ import annotations

from tests.collectors.inflight_gloo import STEPS, one_try
from tracekit.loader.loading import LoadOptions, load


def test_inflight_allgather_across_step_with_handles_released(tmp_path):
    res = one_try(str(tmp_path), release=True, timeout=240, mb=1)  # 1 MB: the crash itself needs no size
    for rank, r in enumerate(res["ranks"]):
        assert r["rc"] == 0, (rank, r["rc"], r["stderr_tail"])
        done = r["finished"]
        assert done is not None and done["rank"] == rank and done["steps"] == STEPS and done["problems"] == []
        # repeat=0 over 6 steps: cycle 0 records steps 2-3; cycle 1 is in warm-up (step 5) when the block ends,
        # and torch.profiler writes that partial cycle too
        first, second = done["traces"]
        ts = load(first, options=LoadOptions(cache=False))
        assert sorted({int(s) for s in ts.table(rank)["step"] if s >= 0}) == [2, 3]
        assert "gloo:all_gather" in set(ts.table(rank).decode("name_id"))  # the worker thread's span of the in-flight gather
        load(second, options=LoadOptions(cache=False))
