"""tracekit.profile used the ways real training loops use it, including wrongly: the user's exception passes
through unchanged with the completed steps' trace written, ``step()`` outside the block does nothing, a loop
that stops early, the output directory removed mid-run, no ``step()`` at all, schedules that record nothing or
are invalid, a torch profiler used before, and DataLoader worker processes forked inside the profiled loop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import tracekit
from tests.helpers.net import free_port
from tests.helpers.tracefile import read


def _one_step(w):
    (torch.randn(8, 16) @ w).sum().backward()


def _steps_in(path) -> list[int]:
    names = [e["name"] for e in read(path)["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    return sorted(int(n.removeprefix("ProfilerStep#")) for n in names)


class _UserError(Exception):
    pass


def test_user_exception_propagates_unchanged_and_completed_steps_are_written(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)
    err = _UserError("loss is nan")
    with pytest.raises(_UserError) as caught:
        with tracekit.profile(tmp_path, wait=0, warmup=0, active=5) as p:
            for i in range(5):
                _one_step(w)
                if i == 2:
                    raise err
                p.step()
    assert caught.value is err  # the very object the user raised, not a wrapper
    assert p.trace_paths == [tmp_path / "rank0.trace.json.gz"] and p.problems == []
    assert _steps_in(p.trace_paths[0]) == [0, 1, 2]  # steps 0, 1 completed; 2 was running when it raised


def test_keyboard_interrupt_inside_a_step(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)
    with pytest.raises(KeyboardInterrupt):
        with tracekit.profile(tmp_path, wait=0, warmup=0, active=4) as p:
            for i in range(4):
                _one_step(w)
                if i == 1:
                    raise KeyboardInterrupt
                p.step()
    assert _steps_in(p.trace_paths[0]) == [0, 1]
    assert (tmp_path / "run.json").exists()


def test_step_before_entry_and_after_exit_does_nothing(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)
    p = tracekit.profile(tmp_path, wait=0, warmup=0, active=2)
    p.step()  # before __enter__
    with p:
        for _ in range(2):
            _one_step(w)
            p.step()
    p.step()  # after __exit__: the profiler is finished, nothing is recorded
    p.step()
    assert _steps_in(p.trace_paths[0]) == [0, 1]
    assert p.overhead is not None and p.overhead.steps == 2
    assert [m for m in p.problems if "step() called outside" in m] == [
        "rank 0: step() called outside `with tracekit.profile(...)`; ignored"
    ]  # reported once, not per call


def test_two_profiles_in_sequence_both_record(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)
    for run in ("a", "b"):
        with tracekit.profile(tmp_path / run, wait=0, warmup=0, active=2) as p:
            for _ in range(3):
                _one_step(w)
                p.step()
        assert _steps_in(p.trace_paths[0]) == [0, 1] and p.problems == []


def test_generator_loop_that_breaks_early_writes_the_steps_it_ran(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)

    def batches():
        yield from range(100)

    with tracekit.profile(tmp_path, wait=1, warmup=0, active=10) as p:
        for i in batches():
            _one_step(w)
            p.step()
            if i == 3:
                break  # the active window (steps 1-10) is cut short: its recorded steps are still written
    assert _steps_in(p.trace_paths[0]) == [1, 2, 3, 4]  # 4: the step begun by the last step() call, empty


def test_output_directory_deleted_mid_run(tmp_path):
    out = tmp_path / "run"
    w = torch.randn(16, 16, requires_grad=True)
    with tracekit.profile(out, wait=1, warmup=0, active=2) as p:
        for i in range(4):
            if i == 1:
                shutil.rmtree(out)  # a cleanup job, or the user, removes it while training runs
            _one_step(w)
            p.step()
    assert p.trace_paths == [out / "rank0.trace.json.gz"] and _steps_in(p.trace_paths[0]) == [1, 2]
    assert (out / "run.json").exists()  # the manifest is written again at exit, overhead included


def test_no_step_call_at_all(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)
    with tracekit.profile(tmp_path, wait=0, warmup=0, active=2) as p:
        _one_step(w)  # the loop never calls p.step() (this rank had no batches, or the call was forgotten)
    assert p.overhead is not None and p.overhead.steps == 0
    # the schedule records from step 0, so torch.profiler wrote the whole block as its step 0
    assert p.problems == [
        "rank 0: step() was never called, the whole block was recorded as one step (call p.step() "
        "at the end of every training step)"
    ]
    assert _steps_in(p.trace_paths[0]) == [0]
    with tracekit.profile(tmp_path / "later", wait=1, warmup=0, active=2) as p:
        _one_step(w)
    assert p.trace_paths == [] and p.problems[0].endswith(
        "step() was never called, nothing was recorded (call p.step() at the end of every training step)"
    )


@pytest.mark.parametrize("schedule", [{"active": 0}, {"wait": -1}, {"active": "3"}])
def test_invalid_schedule_is_a_problem_not_a_failure(tmp_path, schedule):
    args = {"wait": 0, "warmup": 0, "active": 2, **schedule}
    w = torch.randn(16, 16, requires_grad=True)
    with tracekit.profile(tmp_path, **args) as p:
        for _ in range(3):
            _one_step(w)
            p.step()
    assert p.trace_paths == [] and not list(tmp_path.glob("*.trace.json.gz"))
    assert len(p.problems) == 1 and "schedule" in p.problems[0] and "nothing is recorded" in p.problems[0]


def test_schedule_longer_than_the_run_records_nothing_and_says_so(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)
    with tracekit.profile(tmp_path, wait=10**9, warmup=0, active=1) as p:
        for _ in range(3):
            _one_step(w)
            p.step()
    assert p.trace_paths == [] and p.overhead is not None and p.overhead.steps == 3
    assert any("no step was recorded" in m for m in p.problems), p.problems


def test_a_torch_profiler_configured_differently_before(tmp_path):
    """The user profiled earlier in the process with other options (memory, stacks, shapes off, its own
    schedule); tracekit's run records with its own options and the user's result is untouched."""
    w = torch.randn(16, 16, requires_grad=True)
    sched = torch.profiler.schedule(wait=0, warmup=1, active=1)
    with torch.profiler.profile(schedule=sched, profile_memory=True, with_stack=True, record_shapes=False) as theirs:
        for _ in range(2):
            _one_step(w)
            theirs.step()
    before = len(theirs.events())
    with tracekit.profile(tmp_path, wait=0, warmup=0, active=2) as p:
        for _ in range(2):
            _one_step(w)
            p.step()
    trace = read(p.trace_paths[0])
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    assert ops and all("Input Dims" in e["args"] for e in ops if e["name"] == "aten::mm")  # our record_shapes
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "python_function"]  # their with_stack is off
    assert len(theirs.events()) == before and p.problems == []


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.full((16,), float(i))


def test_dataloader_workers_forked_inside_the_profiled_loop(tmp_path):
    w = torch.randn(16, 16, requires_grad=True)
    loader = torch.utils.data.DataLoader(_Squares(), batch_size=2, num_workers=2, multiprocessing_context="fork")
    seen = []
    with tracekit.profile(tmp_path, wait=0, warmup=0, active=3) as p:
        for _epoch in range(2):  # a new set of forked workers per epoch, the second one while recording
            for batch in loader:
                (batch @ w).sum().backward()
                seen.append(int(batch[0, 0]))
                p.step()
    assert seen == [0, 2, 4, 6] * 2  # every batch arrived, in order
    assert _steps_in(p.trace_paths[0]) == [0, 1, 2] and p.problems == []
    assert sorted(f.name for f in tmp_path.iterdir()) == ["rank0.trace.json.gz", "run.json"]  # no worker wrote


NO_STEP_RANK = textwrap.dedent("""
    import json, os, sys, torch, torch.distributed as dist, tracekit
    from datetime import timedelta
    rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=60))
    w = torch.randn(16, 16, requires_grad=True)
    with tracekit.profile(out, wait=0, warmup=0, active=3) as p:
        for _ in range(4):
            (torch.randn(8, 16) @ w).sum().backward()
            dist.all_reduce(w.grad)
            if rank == 0:  # rank 1's loop never calls p.step()
                p.step()
    dist.barrier()
    print(json.dumps({"rank": rank, "traces": [str(t) for t in p.trace_paths], "problems": p.problems}))
    dist.destroy_process_group()
""")


def test_a_rank_that_never_calls_step_does_not_hold_up_its_peer(tmp_path):
    """tracekit issues no collective in step() or at exit, so the ranks' profilers need not agree."""
    port = str(free_port())
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", NO_STEP_RANK, str(r), port, str(tmp_path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    outs = [p.communicate(timeout=180) for p in procs]  # a guard against a hang, not a timing assertion
    assert [p.returncode for p in procs] == [0, 0], [e[-1500:] for _, e in outs]
    r0, r1 = (json.loads(o.strip().splitlines()[-1]) for o, _ in outs)
    assert r0["traces"] == [str(tmp_path / "rank0.trace.json.gz")] and r0["problems"] == []
    assert _steps_in(r0["traces"][0]) == [0, 1, 2]
    assert len(r1["traces"]) == 1 and _steps_in(r1["traces"][0]) == [0]  # the whole block, as one step
    assert len(r1["problems"]) == 1 and "step() was never called" in r1["problems"][0]
