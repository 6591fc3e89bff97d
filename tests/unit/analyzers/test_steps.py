"""Step windows on hand-built tables with answers worked out by hand: nested, overlapping and duplicate
ProfilerSteps, the device span, device events without a launch record, a device event far past the last step,
empty windows, --window annotations and a rank without a usable clock."""

import numpy as np
import pytest

from tests.helpers.tables import ev, table, traceset
from tracekit.analyzers import analyze
from tracekit.analyzers.comm.overlap import rank_overlap
from tracekit.analyzers.comm.steps import plan_steps
from tracekit.errors import EmptyWindowError
from tracekit.model.events import EventTable
from tracekit.model.traceset import RankInfo, RunMetadata, TraceSet

COMM = dict(coll_op="all_reduce", pg_name="0", pg_desc="default_pg", pg_ranks="[0, 1]", group_size=2, seq=0)
GPU = RankInfo(0, 1, device_type="cuda")


def by_step(r):
    return {s.step: s for s in r.steps}


def test_a_nested_profiler_step_is_part_of_the_enclosing_one_which_is_marked():
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 20, 20, step=1, stream=1),  # #1 inside #0
        ev("KERNEL", 25, 10, 1),
        ev("KERNEL", 50, 10, -1),  # the loader put the second outside every step
        ev("COMM", 22, 30, 1, stream=13, **COMM),
    ]
    r = rank_overlap(table(rows), GPU)
    (s,) = r.steps  # one step: the enclosing window, with the nested one's events and those after it
    assert (s.step, s.wall_ns, s.compute_ns, s.comm_ns, s.hidden_comm_ns) == (0, 100, 20, 30, 12)  # [25,35)+[50,52)
    assert not s.complete and "nests ProfilerStep#1" in s.partial_reason and "enclosing" in s.partial_reason
    assert r.totals.steps_left_out == 1 and r.totals.wall_ns == 0
    assert any("nested" in w for w in r.warnings)


def test_overlapping_profiler_steps_are_clipped_and_both_marked():
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 80, 120, step=1, stream=1),
        ev("KERNEL", 10, 10, 0),
        ev("KERNEL", 90, 5, 1),
        ev("KERNEL", 150, 10, 1),
    ]
    r = rank_overlap(table(rows), GPU)
    s0, s1 = r.steps
    assert (s0.host_wall_ns, s1.host_wall_ns) == (80, 120)  # no more wall than the trace spans (200)
    assert (s0.compute_ns, s1.compute_ns) == (10, 15)
    assert "overlaps ProfilerStep#1" in s0.partial_reason and "overlaps ProfilerStep#0" in s1.partial_reason
    assert r.totals.steps_left_out == 2


def test_two_profiler_steps_with_one_number_keep_the_longest():
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 10, 4, step=0, stream=2),  # a few-µs twin
        ev("STEP", 100, 100, step=1, stream=1),
        ev("KERNEL", 5, 10, 0),
        ev("KERNEL", 50, 10, 0),
        ev("KERNEL", 120, 30, 1),
    ]
    r = rank_overlap(table(rows), GPU)
    assert [(s.step, s.wall_ns, s.compute_ns, s.complete) for s in r.steps] == [(0, 100, 20, True), (1, 100, 30, True)]
    assert any("1 duplicate ProfilerStep windows (steps 0)" in w and "longest" in w for w in r.warnings)


def test_device_work_past_the_host_window_extends_the_step_to_its_device_span():
    """A DDP gradient all-reduce launched at the end of step 0 runs [120, 260) on the device, after step 1's
    host window began; it is step 0's, and step 0's time runs to 260."""
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 100, 100, step=1, stream=1),
        ev("RUNTIME", 90, 2, 0, stream=1, correlation=7),
        ev("RUNTIME", 110, 2, 1, stream=1, correlation=8),
        ev("COMM", 120, 140, 0, stream=13, device=0, correlation=7, **COMM),
        ev("KERNEL", 130, 50, 1, device=0, correlation=8),
    ]
    r = rank_overlap(table(rows), GPU)
    s0, s1 = r.steps
    assert (s0.host_wall_ns, s0.wall_ns, s0.comm_ns, s0.hidden_comm_ns, s0.exposed_comm_ns) == (100, 260, 140, 50, 90)
    assert s0.idle_ns == 260 - 140  # idle over the device span: busy is [120, 260)
    assert (s1.host_wall_ns, s1.wall_ns, s1.compute_ns) == (100, 100, 50)
    assert all(s.exposed_comm_ns <= s.wall_ns for s in r.steps)
    d = s0.to_dict()
    assert (d["wall_us"], d["host_wall_us"]) == (0.26, 0.1)


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_no_step_shows_more_exposed_communication_than_time(seed):
    rng = np.random.default_rng(seed)
    rows = [ev("STEP", 100 * i, 100, step=i, stream=1) for i in range(4)]
    for c in range(40):  # launches anywhere in the steps, device work up to 300 ns later
        launch = int(rng.integers(0, 400))
        rows.append(ev("RUNTIME", launch, 1, launch // 100, stream=1, correlation=c))
        kind = "COMM" if c % 2 else "KERNEL"
        rows.append(
            ev(
                kind,
                launch + int(rng.integers(1, 300)),
                int(rng.integers(1, 80)),
                launch // 100,
                stream=13 if kind == "COMM" else 7,
                device=0,
                correlation=c,
                **(COMM if kind == "COMM" else {}),
            )
        )
    r = rank_overlap(table(rows, seed), GPU)
    assert all(0 <= s.exposed_comm_ns <= s.wall_ns and s.idle_ns >= 0 for s in r.steps)


def test_device_events_without_a_launch_record_are_placed_by_time_and_counted():
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 100, 100, step=1, stream=1),
        ev("KERNEL", 5, 20, 0, device=0, correlation=3),  # launched before the profiler started
        ev("KERNEL", 150, 10, 1, device=0, correlation=4),
        ev("RUNTIME", 140, 2, 1, stream=1, correlation=4),
    ]
    r = rank_overlap(table(rows), GPU)
    assert [(s.step, s.orphan_device_events, s.compute_ns) for s in r.steps] == [(0, 1, 20), (1, 0, 10)]
    assert r.totals.orphan_device_events == 1
    (w,) = [w for w in r.warnings if "no launch record" in w]
    assert w.startswith("rank 0: 1 device events") and "HTA drops them" in w


def test_a_device_event_more_than_a_second_past_the_last_step_is_dropped():
    late = 200 + 31 * 365 * 86400 * 10**9  # 31 years later (a corrupt timestamp)
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("RUNTIME", 10, 2, 0, stream=1, correlation=1),
        ev("KERNEL", 20, 30, 0, device=0, correlation=2),
        ev("RUNTIME", 15, 2, 0, stream=1, correlation=2),
        ev("KERNEL", late, 10, 0, device=0, correlation=1),
    ]
    t = table(rows)
    plan = plan_steps(t, GPU)
    assert plan.keep.tolist() == [True, True, True, True, False]
    (s,) = rank_overlap(t, GPU).steps
    # the figures leave it out, and the step that launched it lost it: incomplete, counted (issue 29)
    assert (s.wall_ns, s.compute_ns, s.complete, s.dropped_events) == (100, 30, False, 1)
    assert s.partial_reason == "lost 1 event (1 late)"
    assert any("dropped 1 device events that start more than 1 s after the last step" in w for w in plan.warnings)


def test_launches_without_device_activity_make_a_step_incomplete():
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 100, 100, step=1, stream=1),
        ev("RUNTIME", 10, 2, 0, stream=1, correlation=1, name="cudaLaunchKernel"),
        ev("KERNEL", 20, 30, 0, device=0, correlation=1),
        ev("STEP", 200, 100, step=2, stream=1),
        ev("RUNTIME", 210, 2, 2, stream=1, correlation=4, name="cudaDeviceSynchronize"),  # a CPU-bound step
        ev("RUNTIME", 110, 2, 1, stream=1, correlation=2, name="cudaLaunchKernel"),  # its kernel is not here
        ev("RUNTIME", 60, 2, 0, stream=1, correlation=3, name="cudaStreamSynchronize"),
    ]  # not a launch
    r = rank_overlap(table(rows), GPU)
    assert [s.complete for s in r.steps] == [True, False, True]
    assert r.steps[1].partial_reason == "its 1 launches have no device activity in the trace"
    assert (r.totals.wall_ns, r.totals.compute_ns, r.totals.steps_left_out) == (200, 30, 1)


def test_a_truncated_cpu_trace_marks_the_steps_its_cut_falls_in():
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 100, 100, step=1, stream=1),
        ev("CPU_OP", 20, 30, 0, stream=1),
        ev("CPU_OP", 120, 30, 1, stream=1),
    ]
    info = RankInfo(0, 1, device_type="cpu", truncated=True, last_complete_ns=150)
    r = rank_overlap(table(rows), info)
    assert [s.complete for s in r.steps] == [True, False]
    assert r.steps[1].partial_reason == "the trace was cut (truncated file) before the step's work ends"


def test_a_truncated_cpu_trace_that_lost_a_gloo_worker_marks_every_step_with_calls():
    rows = [ev("STEP", 0, 100, step=0, stream=1), ev("STEP", 100, 100, step=1, stream=1)]
    for st in (0, 1):  # two calls a step; the worker threads 98 and 99 run one span each ...
        rows += [
            ev("CPU_COMM_OP", 100 * st + 10, 5, st, stream=1, name="c10d::allreduce_"),
            ev("CPU_COMM_OP", 100 * st + 30, 5, st, stream=1, name="c10d::allreduce_"),
            ev("COMM", 100 * st + 12, 10, st, stream=98, name="gloo:all_reduce", **COMM),
        ]
    rows.append(ev("COMM", 32, 10, 0, stream=99, name="gloo:all_reduce", **COMM))  # ... but 99 was cut in step 0
    info = RankInfo(0, 1, device_type="cpu", truncated=True, last_complete_ns=32)
    r = rank_overlap(table(rows), info)
    assert [s.complete for s in r.steps] == [False, False]
    assert "2 collective calls but 1 communication spans" in r.steps[1].partial_reason
    whole = RankInfo(0, 1, device_type="cpu", truncated=True, last_complete_ns=10**6, activities_whole=True)
    assert all(s.complete for s in rank_overlap(table(rows), whole).steps)  # only the metadata trailer was cut


def test_a_truncated_gpu_trace_has_no_complete_step_unless_only_its_trailer_was_cut():
    """Kineto writes device activity in CUPTI flush order: a step's kernels can come after a later step's (seen
    in pp-sendrecv-128rank-rank0: step 551's tail after step 552), so no cut time bounds what was lost."""
    rows = [
        ev("STEP", 0, 100, step=0, stream=1),
        ev("STEP", 100, 100, step=1, stream=1),
        ev("KERNEL", 20, 30, 0, device=0),
        ev("KERNEL", 120, 30, 1, device=0),
    ]
    info = RankInfo(0, 1, device_type="cuda", truncated=True, last_complete_ns=150)
    r = rank_overlap(table(rows), info)
    assert [s.complete for s in r.steps] == [False, False]
    assert "flush order, not time order" in r.steps[0].partial_reason
    trailer = RankInfo(0, 1, device_type="cuda", truncated=True, last_complete_ns=150, activities_whole=True)
    assert [s.complete for s in rank_overlap(table(rows), trailer).steps] == [True, True]


def test_a_truncated_gpu_trace_that_lost_every_device_event_is_not_a_cpu_run():
    rows = [ev("STEP", 0, 100, step=0, stream=1), ev("CPU_OP", 10, 50, 0, stream=1)]
    info = RankInfo(0, 1, device_type="cpu", device_properties=({"name": "H100"},), truncated=True, last_complete_ns=300)
    r = rank_overlap(table(rows), info)
    assert r.device_type == "cuda" and r.steps[0].compute_ns == 0
    assert r.steps[0].partial_reason == "the truncated GPU trace lost every device event"
    nccl = RankInfo(0, 1, backend="nccl", device_type="cpu", truncated=True, last_complete_ns=300)  # no properties
    assert rank_overlap(table(rows), nccl).steps[0].partial_reason == "the truncated GPU trace lost every device event"
    gloo = RankInfo(0, 1, backend="gloo", device_type="cpu", truncated=True, last_complete_ns=300)
    assert rank_overlap(table(rows), gloo).steps[0].complete  # a CPU run cut after its last step


def test_no_data_is_an_empty_window_error():
    with pytest.raises(EmptyWindowError, match="no step and no events"):
        analyze(traceset({0: EventTable.empty()}))
    d = analyze(traceset({0: EventTable.empty()}), allow_empty=True).to_dict()
    assert d["ranks"][0]["steps"] == [] and d["ranks"][0]["totals"]["steps_left_out"] == 0
    overlapping = [ev("STEP", 0, 100, step=0, stream=1), ev("STEP", 80, 100, step=1, stream=1), ev("KERNEL", 10, 5, 0)]
    with pytest.raises(EmptyWindowError, match="all 2 steps .* are incomplete"):
        analyze(traceset({0: table(overlapping)}))


def test_window_takes_an_annotation_as_the_steps():
    name = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
    rows = [
        ev("ANNOTATION", 0, 50, name=name, stream=1),
        ev("ANNOTATION", 10, 20, name=name, stream=1),  # nested
        ev("ANNOTATION", 100, 40, name=name, stream=1),
        ev("ANNOTATION", 60, 10, name="other", stream=1),
        ev("KERNEL", 5, 10, device=0),
        ev("KERNEL", 40, 30, device=0),
        ev("KERNEL", 110, 10, device=0),
        ev("KERNEL", 80, 5, device=0),
    ]
    for pattern in (name, "*measure|forward]"):
        r = analyze(traceset({0: table(rows)}), window=pattern).comm.ranks[0]
        assert [(s.step, s.host_wall_ns, s.wall_ns, s.compute_ns, s.complete) for s in r.steps] == [
            (0, 50, 70, 40, True),
            (1, 40, 40, 10, True),
        ]  # the kernel at 80 is in no window
    with pytest.raises(EmptyWindowError, match="--window 'nope'"):
        analyze(traceset({0: table(rows)}), window="nope")


def test_a_rank_without_a_usable_clock_moves_no_other_rank():
    def rows(shift):
        return [
            ev("STEP", shift, 100, step=0, stream=1),
            ev("KERNEL", shift + 10, 50, 0),
            ev("COMM", shift + 40, 40, 0, stream=13, **COMM),
        ]

    base = 1_700_000_000 * 10**9
    infos = {
        0: RankInfo(0, 2, device_type="cuda", base_time_ns=base),
        1: RankInfo(1, 2, device_type="cuda", base_time_ns=0, truncated=True, last_complete_ns=10**6),
    }
    ts = TraceSet({0: table(rows(base)), 1: table(rows(0))}, infos, RunMetadata(world_size=2))
    d = analyze(ts).to_dict()
    (w,) = [w for w in d["warnings"] if "no usable clock" in w]
    assert w.startswith("rank 1: no usable clock: its trace has no baseTimeNanoseconds (truncated")
    assert d["clock_offsets"] == [] and d["stragglers"] == []
    assert all(c["wait_us"] is None and c["skew_us"] is None for c in d["collectives"])
    assert [c["rank"] for c in d["collectives"]] == [0, 1]  # both ranks' collectives are still listed
    alone = analyze(TraceSet({0: table(rows(base))}, {0: infos[0]}, RunMetadata(world_size=2))).to_dict()
    assert d["ranks"][0]["steps"] == alone["ranks"][0]["steps"]


def test_a_real_trace_whose_profiler_started_after_some_launches(tmp_path):
    """The NCCL trace with the launch records of its first 40 kernels removed (as if the profiler started after
    them): those kernels are counted as orphans in the step their start falls in, and nothing else changes
    except where a kernel starts in another step than the one that launched it."""
    import gzip
    import json

    from tests.helpers.data import gpu_trace
    from tracekit.loader.loading import LoadOptions, load

    doc = json.loads(gzip.open(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")).read())
    kernels = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])[:40]
    gone = {e["args"]["correlation"] for e in kernels}
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not (e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in gone)
    ]
    (tmp_path / "late.json").write_text(json.dumps(doc))
    opts = LoadOptions(cache=False)
    d = analyze(load(str(tmp_path / "late.json"), options=opts, executor="serial")).to_dict()
    intact = analyze(load(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), options=opts, executor="serial")).to_dict()
    steps = d["ranks"][0]["steps"]
    assert [s["orphan_device_events"] for s in steps] == [40, 0, 0]
    assert d["ranks"][0]["totals"]["orphan_device_events"] == 40
    assert any(w.startswith("rank 0: 40 device events have no launch record") for w in d["warnings"])
    same = {k: v for k, v in steps[0].items() if k != "orphan_device_events"}
    assert same == {k: v for k, v in intact["ranks"][0]["steps"][0].items() if k != "orphan_device_events"}


def test_overlapping_window_instances_are_marked_by_their_start():
    rows = [
        ev("ANNOTATION", 0, 50, name="f", stream=1),
        ev("ANNOTATION", 10, 5, name="f", stream=1),
        ev("ANNOTATION", 40, 40, name="f", stream=1),
    ]
    plan = plan_steps(table(rows), RankInfo(0, 1), "f")
    assert plan.ids.tolist() == [0, 1] and plan.host_end.tolist() == [40, 80]
    assert plan.reasons == (
        "overlaps the 'f' instance at 40 ns (host window clipped at its start)",
        "overlaps the 'f' instance at 0 ns",
    )


def test_a_queued_device_gives_spans_that_tile_the_device_timeline():
    """The host launches each step's kernel at once and runs ahead; the device works through the queue:
    kernels [10, 110), [110, 210), [210, 310) for host windows [0, 20), [20, 40), [40, 60). Each step's span
    starts where the previous one ends, so the three walls add up to the 310 ns the device ran, not
    110 + 190 + 270 = 570 (the window-start rule counted the queue time of every earlier step again)."""
    rows = [ev("STEP", 20 * i, 20, step=i, stream=1) for i in range(3)]
    for i in range(3):
        rows += [
            ev("RUNTIME", 20 * i + 1, 2, i, stream=1, correlation=i),
            ev("KERNEL", 10 + 100 * i, 100, i, device=0, correlation=i),
        ]
    r = rank_overlap(table(rows), GPU)
    assert [(s.host_wall_ns, s.wall_ns, s.compute_ns, s.idle_ns) for s in r.steps] == [
        (20, 110, 100, 10),
        (20, 100, 100, 0),
        (20, 100, 100, 0),
    ]
    assert sum(s.wall_ns for s in r.steps) == 310


S = 10**9  # 1 s in ns


def _three_steps(extra):
    """Steps 0, 1, 2 of 1 s each, one kernel launched in each; ``extra`` rows added."""
    rows = []
    for n in range(3):
        rows += [
            ev("STEP", n * S, S, step=n, stream=1),
            ev("RUNTIME", n * S + 10, 2, n, stream=1, correlation=n + 1),
            ev("KERNEL", n * S + 20, 30, n, device=0, correlation=n + 1),
        ]
    return table(rows + extra)


def test_a_device_event_still_running_a_second_after_the_step_two_later_is_dropped():
    """Step 0's second kernel ends 1.5 s after step 2 ended on the host (3 s) and began on the device (2 s): by then
    the device had moved on two steps, whatever the host ran ahead by; dropped, counted in step 0, which is
    incomplete (issue 29, item 1)."""
    overdue = ev("KERNEL", 100, 4 * S + S // 2, 0, device=0, correlation=1, stream=8)
    plan = plan_steps(_three_steps([overdue]), GPU)
    assert plan.keep.tolist()[-1] is False and plan.dropped.tolist() == [1, 0, 0]
    assert plan.reasons[0] == "lost 1 event (1 overdue)" and not plan.reasons[1] and not plan.reasons[2]
    assert any("end more than 1 s after the step two later ended on the host" in w for w in plan.warnings)


def test_a_device_event_ending_within_a_second_of_the_step_two_later_ending_stays():
    """The same kernel ending 0.9 s after step 2's host window: a long kernel, not a corrupt one (the bound is stated)."""
    long = ev("KERNEL", 100, 3 * S + S * 9 // 10 - 100, 0, device=0, correlation=1, stream=8)
    plan = plan_steps(_three_steps([long]), GPU)
    assert plan.keep.all() and plan.dropped.tolist() == [0, 0, 0] and not any(plan.reasons)


def test_events_the_loader_dropped_mark_the_step_of_their_launch_or_their_window_or_every_step():
    """By the launch (correlation 2 -> step 1), by the window the start falls in (2.5 s -> step 2), and one whose time
    and link are both unreadable in every step."""
    from dataclasses import replace

    from tracekit.model.dropped import UNKNOWN_NS, DroppedEvents

    dropped = DroppedEvents().plus("times", 2, [UNKNOWN_NS, 2 * S + S // 2], [2, -1]).plus("malformed", 1)
    plan = plan_steps(_three_steps([]), replace(GPU, dropped=dropped))
    assert plan.dropped.tolist() == [1, 2, 2]
    assert plan.reasons == (
        "lost 1 event (1 malformed)",
        "lost 2 events (1 times, 1 malformed)",
        "lost 2 events (1 times, 1 malformed)",
    )
    assert any("1 dropped events have no readable time" in w for w in plan.warnings)
