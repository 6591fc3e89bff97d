"""Per rank/step/stream/instance overlap on hand-built tables whose answers are worked out by hand."""

import pytest

from tests.helpers.tables import ev, table, traceset
from tracekit.analyzers import analyze
from tracekit.analyzers.comm.overlap import rank_overlap
from tracekit.model.traceset import RankInfo

COMM = dict(coll_op="all_reduce", pg_name="0", pg_desc="default_pg", pg_ranks="[0, 1]", group_size=2)


def gpu_rows():
    return [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 100, 100, step=1, stream=1),
        ev("STEP", 200, 100, step=2, stream=1),
        # step 0: nested and overlapping kernels on one stream, a zero-length kernel -> K0 = [0, 70)
        ev("KERNEL", 0, 50, 0),
        ev("KERNEL", 10, 10, 0),
        ev("KERNEL", 40, 30, 0),
        ev("KERNEL", 80, 0, 0),
        # comm on two streams at once: [30, 90) on 13 and [60, 80) on 14 -> C0 = [30, 90), both streams [60, 80)
        ev("COMM", 30, 60, 0, stream=13, **COMM),
        ev("COMM", 60, 20, 0, stream=14, **COMM),
        ev("MEMCPY", 95, 4, 0, stream=7),
        # step 1: a collective launched in step 1 straddling into step 2, hidden under a kernel launched in step 1
        ev("KERNEL", 150, 10, 1),
        ev("COMM", 180, 50, 1, stream=13, **COMM),
        ev("KERNEL", 210, 40, 1),
        # step 2: no communication
        ev("KERNEL", 260, 20, 2),
        ev("MEMSET", 290, 5, 2),
    ]


EXPECTED = {  # step: wall (device span), compute, comm, hidden, exposed, idle, memcpy, memset, multi-stream
    0: (100, 70, 60, 40, 20, 6, 4, 0, 20),
    # step 1's collective and last kernel end at 230 and 250, past its window [100, 200): its device span is
    # [100, 250); idle over it: 150 - |[150,160) + [180,250)| = 70
    1: (150, 50, 50, 20, 30, 70, 0, 0, 0),
    # step 2's device work starts at 260, after step 1's span ends (250): [200, 250) is step 1's time already,
    # so step 2's span is [250, 300) and the three spans tile the trace (300 ns, not 350); idle 50 - 25
    2: (50, 20, 0, 0, 0, 25, 0, 5, 0),
}
FIELDS = (
    "wall_ns",
    "compute_ns",
    "comm_ns",
    "hidden_comm_ns",
    "exposed_comm_ns",
    "idle_ns",
    "memcpy_ns",
    "memset_ns",
    "multi_stream_comm_ns",
)


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_gpu_steps_match_hand_computed_answers(seed):
    r = rank_overlap(table(gpu_rows(), seed), RankInfo(0, 2, device_type="cuda"))
    got = {s.step: tuple(getattr(s, f) for f in FIELDS) for s in r.steps}
    assert got == EXPECTED
    assert r.totals.comm_ns == 110 and r.totals.hidden_comm_ns == 60
    assert [s.host_wall_ns for s in r.steps] == [100, 100, 100] and r.totals.steps_left_out == 0
    assert r.totals.overlap_ratio == pytest.approx(60 / 110)
    assert r.steps[2].overlap_ratio == 0.0
    assert [(s.stream, s.comm_ns, s.hidden_comm_ns) for s in r.streams] == [(13, 110, 60), (14, 20, 10)]
    inst = r.instances
    assert list(zip(inst["start_ns"], inst["end_ns"] - inst["start_ns"], inst["hidden_ns"])) == [
        (30, 60, 40),
        (60, 20, 10),
        (180, 50, 20),
    ]
    assert list(inst["bytes"]) == [-1, -1, -1]  # no size recorded: unknown (null in the summary), not 0


def test_cpu_compute_is_host_ops_minus_waits():
    rows = [
        ev("STEP", 0, 120, step=5, stream=1),
        ev("CPU_OP", 0, 100, 5, stream=1),
        ev("CPU_OP", 10, 5, 5, stream=1),  # nested op
        ev("SYNC", 40, 20, 5, stream=1),  # host blocked in Work.wait
        ev("COMM", 30, 40, 5, stream=99, name="gloo:all_reduce", **COMM),
        ev("CPU_COMM_OP", 30, 2, 5, stream=1),
    ]  # host side of the collective: not compute
    r = rank_overlap(table(rows), RankInfo(0, 2, device_type="cpu"))
    (s,) = r.steps
    # K = [0,100] minus the wait [40,60] and the collective call [30,32] = 78; C = [30,70]; C ∩ K = [32,40]+[60,70]
    assert (s.compute_ns, s.comm_ns, s.hidden_comm_ns, s.exposed_comm_ns, s.idle_ns) == (78, 40, 18, 22, 20)


def test_cpu_blocking_is_per_thread():
    """An autograd Function op that encloses a synchronous collective is not compute while its thread is in the
    collective call; an op on another host thread running meanwhile is."""
    rows = [
        ev("STEP", 0, 100, step=1, stream=1),
        ev("CPU_OP", 0, 100, 1, stream=1, name="ColumnParallel"),
        ev("CPU_COMM_OP", 20, 50, 1, stream=1, name="c10d::allreduce_"),  # blocks thread 1 for [20,70]
        ev("COMM", 25, 40, 1, stream=99, name="gloo:all_reduce", **COMM),
        ev("CPU_OP", 30, 10, 1, stream=2, name="autograd::engine::evaluate_function: MmBackward0"),
    ]
    (s,) = rank_overlap(table(rows), RankInfo(0, 2, device_type="cpu")).steps
    # K = ([0,100] \ [20,70]) ∪ [30,40] -> 50 + 10 = 60; C = [25,65]; C ∩ K = [30,40]
    assert (s.compute_ns, s.comm_ns, s.hidden_comm_ns, s.exposed_comm_ns) == (60, 40, 10, 30)


def test_a_trace_without_profiler_steps_is_one_window():
    rows = [ev("KERNEL", 0, 10), ev("COMM", 5, 10, stream=13, **COMM)]
    r = rank_overlap(table(rows), RankInfo(0, 2, device_type="cuda"))
    assert [(s.step, s.wall_ns, s.comm_ns, s.hidden_comm_ns, s.idle_ns) for s in r.steps] == [(-1, 15, 10, 5, 0)]


def test_summary_json_has_the_contract_keys_and_single_rank_nulls():
    d = analyze(traceset({0: table(gpu_rows())}, world_size=2)).to_dict()
    assert d["schema"] == "tracekit.summary/1"
    step0 = d["ranks"][0]["steps"][0]
    assert step0 == {
        "step": 0,
        "wall_us": 0.1,
        "compute_us": 0.07,
        "comm_us": 0.06,
        "hidden_comm_us": 0.04,
        "exposed_comm_us": 0.02,
        "overlap_ratio": pytest.approx(2 / 3),
        "idle_us": 0.006,
        "memcpy_us": 0.004,
        "memset_us": 0.0,
        "multi_stream_comm_us": 0.02,
        "host_wall_us": 0.1,
        "orphan_device_events": 0,
        "dropped_events": 0,
        "complete": True,
    }
    assert d["ranks"][0]["totals"]["comm_us"] == pytest.approx(0.11)
    (dim,) = d["by_dimension"]
    assert (dim["dimension"], dim["op"], dim["count"], dim["wait_us"]) == ("world", "all_reduce", 3, None)
    assert dim["comm_us"] == pytest.approx(0.13) and dim["hidden_comm_us"] == pytest.approx(0.07)
    assert all(c["wait_us"] is None for c in d["collectives"])
    assert d["by_process_group"][0]["ranks"] == [0, 1]
