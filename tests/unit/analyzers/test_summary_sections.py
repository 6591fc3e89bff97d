"""The breakdowns and the critical path as sections of tracekit.summary/1: present where they belong, consistent
with the summary's own figures, read back by the summary Structs."""

from __future__ import annotations

import json

import tracekit
from tests.helpers.data import gpu_trace
from tracekit.formats.summary import as_dict, decode_summary


def test_breakdowns_sit_beside_each_ranks_totals_and_agree_with_them():
    s = tracekit.analyze(tracekit.load(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"))).to_dict()
    (r,) = s["ranks"]
    idle = r["idle_breakdown"]
    parts = idle["host_wait_us"] + idle["dependency_wait_us"] + idle["other_us"]
    assert abs(parts - idle["idle_us"]) < 1e-6
    assert abs(idle["idle_us"] - r["totals"]["idle_us"]) < 1e-3  # the overlap totals' idle, measured apart
    part_sum = sum(p["us"] for p in r["busy_partition"]["parts"])
    assert abs(part_sum - r["busy_partition"]["busy_us"]) < 1e-6
    comm = sum(k["total_us"] for k in r["kernel_breakdown"] if k["class"].startswith("comm:"))
    assert comm > 0 and "critical_path" not in s  # opt-in only
    back = as_dict(decode_summary(json.dumps(s).encode()))
    assert back["ranks"][0]["kernel_breakdown"] == r["kernel_breakdown"]


def test_the_critical_path_is_opt_in_and_adds_up():
    s = tracekit.analyze(tracekit.load(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")), critical_path=True).to_dict()
    cp = s["critical_path"]
    assert [p["step"] for p in cp["steps"]] == [st["step"] for st in s["ranks"][0]["steps"]]
    for p in cp["steps"]:
        assert abs(sum(p["by_kind"].values()) - p["length_us"]) < 1e-6
    assert cp["verdict"].startswith(f"{len(cp['steps'])} steps: ")
    assert as_dict(decode_summary(json.dumps(s).encode()))["critical_path"] == cp


def test_cpu_runs_say_the_breakdowns_do_not_apply(tmp_path):
    s = tracekit.analyze(tracekit.load("tests/data/kineto-gpu-more/cpu-only-rank34.json.gz")).to_dict()
    for key in ("kernel_breakdown", "busy_partition", "idle_breakdown", "launch_stats"):
        assert s["ranks"][0][key]["available"] is False and "CPU-only" in s["ranks"][0][key]["reason"]
