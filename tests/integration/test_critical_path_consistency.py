"""What the critical path says agrees with the other figures of the same step (issue 26, items 1 and 5), on every
GPU trace in tests/data and ../shared/traces: the path of a step is its wall_us (to the device end) on every rank,
its kinds and its explained + unexplained parts add up to it, a step whose device is busy at least 90 % of its span
with host waits under 10 % is never host-bound, a step the idle breakdown calls host-bound is host-bound on the
path too, and a host-bound path is one where the device waited for the host or the host window outlasted the device
work, never one whose kernels the launch statistics show queued far behind their launches on a busy device.

The rank-level launch statistics mix the steps' phases: the pipeline-parallel pair (pp-sendrecv, a sampled trace)
queues its forward kernels ~12 ms behind their launches (median) and still ends every step with ~200 ms of host-only
optimizer work after the device is done, which is host-bound on the path and by the window (docs/whatif.md)."""

from __future__ import annotations

import glob
import os
import warnings

import pytest

from tracekit.analyzers import analyze
from tracekit.errors import EmptyWindowError
from tracekit.loader.loading import LoadOptions, load

HERE = os.path.dirname(__file__)
SHARED = os.path.join(HERE, "..", "..", "..", "..", "shared", "traces")
if not os.path.isdir(SHARED):
    SHARED = "/work/shared/traces"
LOCAL = sorted(glob.glob(os.path.join(HERE, "..", "data", "kineto-gpu*", "*.json.gz")))
NAMES = {os.path.basename(p) for p in LOCAL}
TRACES = LOCAL + sorted(
    p for p in glob.glob(os.path.join(SHARED, "kineto-gpu*", "*.json.gz")) if os.path.basename(p) not in NAMES
)


def _analysis(path: str):
    """The summary; a trace without a whole step (triton-kernels: its one ProfilerStep runs 13.3 s past the
    trace's 1.5 ms of events) is refused, and then read as --allow-partial does: the path must agree on partial
    steps too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load([path], options=LoadOptions(cache=False), executor="serial")
        try:
            return analyze(ts, critical_path=True).to_dict()
        except EmptyWindowError as e:
            assert "incomplete" in str(e), e
            return analyze(ts, critical_path=True, allow_empty=True).to_dict()


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_the_path_agrees_with_the_steps_idle_time_and_launches(path):
    d = _analysis(path)
    paths = {s["step"]: s for s in d["critical_path"]["steps"]}
    checked = 0
    for rank in d["ranks"]:
        idle = rank.get("idle_breakdown") or {}
        idle_steps = {s["step"]: s for s in idle.get("steps", [])} if isinstance(idle, dict) else {}
        launches = rank.get("launch_stats") or {}
        for step in rank["steps"]:
            p = paths[step["step"]]
            # item 1: the path explains the step the summary reports, to its device end
            assert p["length_us"] == pytest.approx(step["wall_us"], abs=1e-3)
            assert sum(p["by_kind"].values()) == pytest.approx(p["length_us"], abs=1e-3)
            assert p["explained_us"] + p["unexplained_us"] == pytest.approx(p["length_us"], abs=1e-3)
            i = idle_steps.get(step["step"])
            if i is None or not step["wall_us"]:
                continue
            checked += 1
            busy = 1 - step["idle_us"] / step["wall_us"]
            if busy >= 0.9 and i["host_wait_share"] < 0.1:
                assert p["bound"] != "host", (step["step"], p["verdict"])
            if i["host_bound"]:
                assert p["bound"] == "host", (step["step"], p["verdict"])
            if p["bound"] == "host":
                # the host bounds a step only where the device waited for it or the host window outlasts the device
                # work; with the launch queue full all step long (kernels far behind their launches, the device busy)
                # it cannot
                host_last = step["host_wall_us"] >= step["wall_us"] - 1e-3
                assert i["host_wait_share"] >= 0.1 or host_last, (step, i, p["verdict"])
                if launches.get("median_delay_us") is not None and launches["median_delay_us"] > 1000:
                    assert busy < 0.9 and host_last, (launches["median_delay_us"], busy, p["verdict"])
    assert checked or not any(isinstance(r.get("idle_breakdown"), dict) and r["idle_breakdown"].get("steps") for r in d["ranks"])
