"""Kernel breakdown, busy partition, idle causes and launch statistics on hand-built tables with answers worked
out by hand (the intervals are in the comments)."""

import json

import numpy as np
import pytest

from tests.helpers.tables import ev, table, traceset
from tracekit.analyzers.breakdowns.device_scope import scope
from tracekit.analyzers.breakdowns.idle import idle_breakdown
from tracekit.analyzers.breakdowns.kernel_classes import ClassRule, ClassRuleSet
from tracekit.analyzers.breakdowns.rank_breakdowns import BreakdownOptions, breakdowns


def rt(ts, dur, corr, step=0):
    return ev("RUNTIME", ts, dur, step=step, stream=1, correlation=corr, name="cudaLaunchKernel")


def idle_rows():
    """Step 0 = [0, 100). Device busy [10, 60) [62, 70) [85, 90) [92, 95)."""
    return [
        ev("STEP", 0, 100, step=0, stream=1),
        rt(0, 5, 1),
        ev("KERNEL", 10, 20, 0, stream=7, correlation=1, name="k1"),  # pending [5, 10)
        rt(12, 3, 2),
        ev("COMM", 20, 40, 0, stream=13, correlation=2, name="ncclKernel_AllReduce"),
        # launched at 18, its stream free from 30, starts 2 ns after the comm on stream 13 ends: held [30, 62)
        rt(16, 2, 3),
        ev("KERNEL", 62, 8, 0, stream=7, correlation=3, name="k3"),
        # launch call [75, 80): the host is still launching; pending [80, 85) with nothing to wait for: other
        rt(75, 5, 4),
        ev("MEMCPY", 85, 5, 0, stream=7, correlation=4, name="Memcpy HtoD (Pinned -> Device)"),
        ev("KERNEL", 92, 3, 0, stream=7, correlation=99, name="k5"),  # no launch row: [90, 92) unknown -> other
    ]


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_idle_split_matches_hand_computed_answers(seed):
    t = table(idle_rows(), seed)
    ib = idle_breakdown(scope(t), 0, slack_ns=5)
    d = ib.totals
    # idle [0,10) [60,62) [70,85) [90,92) [95,100) = 34; host [0,5) [70,80) [95,100); dependency [60,62)
    assert (d.wall_ns, d.idle_ns, d.host_wait_ns, d.dependency_wait_ns, d.other_ns) == (100, 34, 20, 2, 12)
    by_stream = {s.stream: s for s in ib.streams}
    s7, s13 = by_stream[7], by_stream[13]
    # stream 7: busy 36, held [30, 62) = 32, other [5,10) [80,85) [90,92) = 12
    assert (s7.idle_ns, s7.host_wait_ns, s7.dependency_wait_ns, s7.other_ns) == (64, 20, 32, 12)
    # stream 13: busy [20, 60), pending [15, 20)
    assert (s13.idle_ns, s13.host_wait_ns, s13.dependency_wait_ns, s13.other_ns) == (60, 55, 0, 5)
    assert not d.host_bound and s13.host_bound  # 20 % vs 55 % of the step waiting for the host


def test_dependency_needs_the_start_within_the_slack():
    exact = idle_breakdown(scope(table(idle_rows())), 0, slack_ns=2)  # exactly the slack: still held
    assert exact.totals.dependency_wait_ns == 2
    ib = idle_breakdown(scope(table(idle_rows())), 0, slack_ns=1)  # k3 starts 2 ns after the comm ends
    assert (ib.totals.dependency_wait_ns, ib.totals.other_ns) == (0, 14)
    assert {s.stream: s.dependency_wait_ns for s in ib.streams}[7] == 0


def test_a_device_stream_wait_in_the_gap_is_a_dependency():
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        rt(0, 2, 1),
        ev("KERNEL", 5, 10, 0, stream=7, correlation=1),
        rt(3, 2, 2),
        ev("SYNC", 40, 0, 0, stream=7, name="Stream Wait Event", device=0),
        ev("KERNEL", 50, 10, 0, stream=7, correlation=2),
    ]
    d = idle_breakdown(scope(table(rows)), 0).totals
    # idle [0,5) [15,50) [60,100): host [0,2) [60,100); launch 1 pending [2,5): other; launch 2 held from its
    # stream's previous end 15 to 50
    assert (d.idle_ns, d.host_wait_ns, d.dependency_wait_ns, d.other_ns) == (80, 42, 35, 3)


def test_idle_follows_overlap_and_steps_add_up():
    from tracekit.analyzers.comm.overlap import rank_overlap
    from tracekit.model.traceset import RankInfo

    rows = idle_rows() + [
        ev("STEP", 100, 100, step=1, stream=1),
        rt(101, 1, 7, step=1),
        ev("KERNEL", 150, 10, 1, stream=7, correlation=7),
    ]
    t = table(rows)
    ib = idle_breakdown(scope(t), 0, slack_ns=5)
    ov = rank_overlap(t, RankInfo(0, 1, device_type="cuda"))
    assert [s.idle_ns for s in ib.steps] == [s.idle_ns for s in ov.steps] == [34, 90]
    # step 1: idle [100,150) [160,200); host [100,102) [160,200); the launch pending [102,150): other
    assert (ib.steps[1].host_wait_ns, ib.steps[1].other_ns) == (42, 48)
    assert ib.totals.idle_ns == sum(s.idle_ns for s in ib.steps)
    only1 = idle_breakdown(scope(t, steps=(1,)), 0)
    assert [s.step for s in only1.steps] == [1] and only1.totals.idle_ns == 90


def kernel_rows():
    name = "void ns::foo<1, int>(int)"
    return [
        ev("STEP", 0, 200, step=0, stream=1),
        ev("KERNEL", 0, 50, 0, name="ampere_sgemm_128x64_nn"),  # K [0, 50)
        ev("COMM", 30, 50, 0, stream=13, name="ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
        ev("MEMCPY", 70, 20, 0, stream=14, name="Memcpy DtoD (Device -> Device)"),  # M [70, 90)
        ev("KERNEL", 85, 10, 0, name="void at::native::vectorized_layer_norm_kernel<float, float>(int)"),
        ev("KERNEL", 100, 10, 0, name=name),
        ev("KERNEL", 120, 20, 0, name=name),
        ev("KERNEL", 140, 60, 0, name=name),
        ev("SYNC", 50, 5, 0, name="Event Sync", device=0),  # listed, not busy
        ev("KERNEL", 500, 10, 1, name=name),  # launched outside every step: not in the range
    ]


def test_kernel_rows_and_classes():
    (b,) = breakdowns(traceset({0: table(kernel_rows())})).values()
    rows = {r["name"]: r for r in b.to_dict()["kernel_breakdown"]}
    foo = rows["void ns::foo<1, int>(int)"]
    assert foo["short_name"] == "ns::foo<1, …>" and foo["class"] == "other"
    # durations 10, 20, 60: p95 = 20 + 0.9 * 40; busy = |[0, 95) ∪ [100, 110) ∪ [120, 200)| = 185
    assert (foo["count"], foo["total_us"], foo["mean_us"], foo["p50_us"], foo["max_us"]) == (3, 0.09, 0.03, 0.02, 0.06)
    assert foo["p95_us"] == pytest.approx(0.056) and foo["share"] == pytest.approx(90 / 185)
    classes = {r["class"]: r["total_us"] * 1e3 for r in b.to_dict()["kernel_classes"]}
    assert classes == {"gemm": 50, "comm:nccl": 50, "memcpy": 20, "normalization": 10, "other": 90, "sync": 5}
    assert list(b.kernel_frame().columns) == [
        "name",
        "short_name",
        "class",
        "count",
        "total_us",
        "mean_us",
        "p50_us",
        "p95_us",
        "max_us",
        "share",
    ]
    assert b.kernel_frame("class").set_index("class")["count"].to_dict()["other"] == 3


def test_user_class_rules_win():
    rules = ClassRuleSet().with_rules([ClassRule(r"ns::foo", "attention")])
    (b,) = breakdowns(traceset({0: table(kernel_rows())}), BreakdownOptions(class_rules=rules)).values()
    assert {r["class"] for r in b.to_dict()["kernel_classes"]} >= {"attention"}


def test_busy_partition_is_exclusive_and_adds_up():
    (b,) = breakdowns(traceset({0: table(kernel_rows(), 3)})).values()
    p = {r["part"]: r["us"] * 1e3 for r in b.to_dict()["busy_partition"]["parts"]}
    # [0,30) K; [30,50) K+C; [50,70) C; [70,80) C+M; [80,85) M; [85,90) K+M; [90,95) K; [100,110) [120,200) K
    assert p == {
        "compute": 30 + 5 + 90,
        "compute_overlapping_communication": 20,
        "communication": 20,
        "communication_overlapping_memory": 10,
        "memory": 5,
        "compute_overlapping_memory": 5,
        "compute_overlapping_communication_overlapping_memory": 0,
    }
    assert sum(p.values()) == b.busy.busy_ns == 185
    assert list(b.busy_frame().columns) == ["part", "us", "share"]


def launch_rows():
    return [
        ev("STEP", 0, 1000, step=0, stream=1),
        rt(0, 10, 1),
        ev("KERNEL", 12, 5, 0, correlation=1, name="short"),  # delay 2, shorter than its launch
        rt(20, 10, 2),
        ev("KERNEL", 28, 50, 0, correlation=2, name="early"),  # starts before its call returns
        rt(40, 80, 3),
        ev("KERNEL", 400, 20, 0, correlation=3, name="late"),  # delay 280, a 80 ns call
        ev("RUNTIME", 50, 5, 0, stream=1, correlation=4, name="cudaMemcpyAsync"),
        ev("MEMCPY", 60, 1, 0, stream=7, correlation=4, name="Memcpy HtoD (Pinned -> Device)"),  # delay 5
        ev("KERNEL", 700, 5, 0, correlation=-1, name="unlaunched"),
    ]


def test_launch_delays_bounds_and_outliers():
    opts = BreakdownOptions(delay_cutoff_ns=100, runtime_cutoff_ns=50)
    (b,) = breakdowns(traceset({0: table(launch_rows(), 5)}), opts).values()
    d = b.to_dict()["launch_stats"]
    delays = sorted(b.launch_frame()["delay_us"] * 1e3)
    assert delays == pytest.approx([-2, 2, 5, 280])
    assert d["activities"] == 5 and d["with_launch"] == 4 and d["negative_delays"] == 1
    assert d["median_delay_us"] * 1e3 == pytest.approx(3.5)
    assert d["launch_bound_kernels"]["count"] == 2  # "short" and "late" (20 ns after an 80 ns call), not the memcpy
    assert sorted(r["short_name"] for r in d["launch_bound_kernels"]["by_short_name"]) == ["late", "short"]
    assert (d["delay_outliers"], d["runtime_outliers"]) == (1, 1)
    assert [o["name"] for o in d["outliers"]] == ["late"]
    assert list(b.outlier_frame()["name"]) == ["late"]


def test_cpu_only_runs_say_the_breakdowns_do_not_exist():
    rows = [ev("STEP", 0, 100, step=0, stream=1), ev("CPU_OP", 0, 50, 0, stream=1, name="aten::mm")]
    (b,) = breakdowns(traceset({0: table(rows)}, device_type="cpu")).values()
    d = b.to_dict()
    for key in ("kernel_breakdown", "kernel_classes", "busy_partition", "idle_breakdown", "launch_stats"):
        assert d[key]["available"] is False and "CPU-only" in d[key]["reason"]
    assert b.kernel_frame().empty and "CPU-only" in b.idle_frame().attrs["reason"]


def test_a_gpu_trace_without_launch_rows_degrades():
    rows = [r for r in idle_rows() if r["kind"] != "RUNTIME"]
    (b,) = breakdowns(traceset({0: table(rows)})).values()
    d = b.to_dict()
    assert d["launch_stats"]["available"] is False
    assert d["idle_breakdown"]["host_wait_us"] >= 0 and d["idle_breakdown"]["notes"]
    assert d["idle_breakdown"]["dependency_wait_us"] == 0


def test_to_dict_is_plain_json():
    (b,) = breakdowns(traceset({0: table(idle_rows() + launch_rows()[1:])})).values()
    text = json.dumps(b.to_dict(), allow_nan=False)
    assert json.loads(text)["idle_breakdown"]["steps"][0]["step"] == 0
    assert np.isfinite(json.loads(text)["launch_stats"]["median_delay_us"])


def queue_rows():
    """A burst of four launches (calls end 10, 20, 30, 40) whose 100 ns kernels run back to back on stream 7 from
    15, then a fifth launched (call ends 510) onto the idle stream, starting at 700 in step 1."""
    return [
        ev("STEP", 0, 450, step=0, stream=1),
        ev("STEP", 450, 550, step=1, stream=1),
        *(rt(10 * i, 10, i) for i in range(4)),
        ev("KERNEL", 15, 100, 0, correlation=0, name="k0"),  # stream idle: delay 5
        ev("KERNEL", 116, 100, 0, correlation=1, name="k1"),  # queued: stream busy until 115, delay 96, own 1
        ev("KERNEL", 217, 100, 0, correlation=2, name="k2"),  # queued: delay 187, queue 186, own 1
        ev("KERNEL", 318, 100, 0, correlation=3, name="k3"),  # queued: delay 278, queue 277, own 1
        rt(500, 10, 4, step=1),
        ev("KERNEL", 700, 10, 1, correlation=4, name="k4"),  # stream idle since 418: delay 190, late
    ]


def test_the_queue_is_not_launch_delay():
    """Hand-worked: a kernel queued behind the previous work on its stream is not a delay outlier (the old count
    was 3: k2, k3, k4); the queue depth at each launch is 1, 1, 2, 3 in step 0 and 1 in step 1."""
    opts = BreakdownOptions(delay_cutoff_ns=100, runtime_cutoff_ns=50)
    (b,) = breakdowns(traceset({0: table(queue_rows(), 3)}), opts).values()
    d = b.to_dict()["launch_stats"]
    f = b.launch_frame().set_index("name")
    assert list(f.loc[["k0", "k1", "k2", "k3", "k4"], "queued"]) == [False, True, True, True, False]
    assert list(f.loc[["k1", "k2", "k3"], "queue_us"] * 1e3) == pytest.approx([95, 186, 277])
    assert list(f.loc[["k0", "k1", "k2", "k3", "k4"], "launch_delay_us"] * 1e3) == pytest.approx([5, 1, 1, 1, 190])
    assert (d["queued"], d["idle_launched"], d["delay_outliers"]) == (3, 2, 1)
    assert [o["name"] for o in d["outliers"]] == ["k4"]
    assert d["median_queue_us"] * 1e3 == pytest.approx(186) and d["median_idle_delay_us"] * 1e3 == pytest.approx(97.5)
    assert d["queue_depth"] == [{"step": 0, "max": 3, "mean": 1.75}, {"step": 1, "max": 1, "mean": 1.0}]
