"""Faults during collection never crash or hang the training loop, and each is reported: a profiler already
running, an exception during export, a full disk (a real small tmpfs, or a file-size limit), an unwritable
directory (test_collectors_profile.py), a rank that dies mid-run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.multiprocessing as mp

import tracekit
from tests.helpers import fault_ranks
from tests.helpers.net import free_port
from tracekit.collectors.workloads.runner import spawn_ranks
from tracekit.errors import TracekitError
from tracekit.loader.loading import LoadOptions, load


def _train(p, steps=4):
    w = torch.randn(16, 16, requires_grad=True)
    for _ in range(steps):
        (torch.randn(8, 16) @ w).sum().backward()
        p.step()
    return steps


def test_profiler_already_running_is_left_alone(tmp_path):
    with torch.profiler.profile() as outer, tracekit.profile(tmp_path, wait=0, warmup=0, active=2) as p:
        assert _train(p) == 4
    assert outer.events() and len(outer.events()) > 50  # the user's profiler was not stopped by ours
    assert p.trace_paths == [] and not list(tmp_path.glob("*.trace.json.gz"))
    assert len(p.problems) == 1 and "another profiler is already running" in p.problems[0]


def test_nested_tracekit_profile(tmp_path):
    with tracekit.profile(tmp_path / "a", wait=0, warmup=0, active=2) as outer:
        with tracekit.profile(tmp_path / "b", wait=0, warmup=0, active=2) as inner:
            _train(inner, 3)
        outer.step()
        outer.step()
    assert "already running" in inner.problems[0] and inner.trace_paths == []
    assert len(outer.trace_paths) == 1 and outer.problems == []


def test_exception_during_export_leaves_no_partial_file(tmp_path):
    (tmp_path / "rank0.trace.json.gz").mkdir()  # the final rename fails: IsADirectoryError inside the export
    with tracekit.profile(tmp_path, wait=0, warmup=0, active=2) as p:
        assert _train(p) == 4
    assert p.trace_paths == [] and any("could not write" in m for m in p.problems)
    assert not [f for f in os.listdir(tmp_path) if "partial" in f]


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A real 64 KiB filesystem (root and mount(2) needed; skipped elsewhere)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount permission)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_full_disk_on_a_real_small_filesystem(tiny_tmpfs):
    with open(tiny_tmpfs / "filler", "wb", buffering=0) as f:  # fill the disk to the last byte
        with pytest.raises(OSError, match="No space left"):
            while True:
                f.write(b"x" * 512)
    with tracekit.profile(tiny_tmpfs / "run", wait=0, warmup=0, active=3) as p:
        assert _train(p, 5) == 5
    assert p.trace_paths == []
    assert any("could not write" in m and "rank0.trace.json.gz" in m for m in p.problems), p.problems
    assert any("No space left" in m for m in p.problems), p.problems
    assert not [f for _, _, fs in os.walk(tiny_tmpfs) for f in fs if f != "filler"]  # nothing half-written left


FSIZE_SCRIPT = textwrap.dedent("""
    import json, resource, signal, sys, torch, tracekit
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
    w = torch.randn(16, 16, requires_grad=True)
    with tracekit.profile(sys.argv[1], wait=0, warmup=0, active=3) as p:
        for _ in range(5):
            (torch.randn(8, 16) @ w).sum().backward()
            p.step()
    print(json.dumps({"done": True, "traces": [str(t) for t in p.trace_paths], "problems": p.problems}))
""")


def test_file_size_limit_mid_export(tmp_path):
    """RLIMIT_FSIZE: the profiler's own (C++) writer is cut off mid-trace and does not say so; tracekit's
    check of the written file catches it."""
    out = subprocess.run(
        [sys.executable, "-c", FSIZE_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["done"] and res["traces"] == []
    assert any("could not write" in m for m in res["problems"]), res
    assert not list(tmp_path.glob("*.gz")) and not list(tmp_path.glob(".*partial*"))


def test_a_rank_dying_mid_run_does_not_hang_its_peer(tmp_path):
    port = free_port()
    queue = mp.get_context("spawn").SimpleQueue()
    procs = mp.start_processes(
        fault_ranks.dies_mid_run, args=(2, port, str(tmp_path), queue, 3), nprocs=2, start_method="spawn", join=False
    )
    rank0 = procs.processes[0]
    rank0.join(120)  # a guard against a hang, not a timing assertion: gloo's 4 s timeout ends the wait
    assert rank0.exitcode == 0
    procs.processes[1].join(10)
    assert procs.processes[1].exitcode == 17
    res = queue.get()
    assert res["rank"] == 0 and res["steps"] == 3 and res["error"]  # the training loop saw the failure
    (trace,) = res["traces"]  # the steps recorded before the peer died were written
    ts = load(trace, options=LoadOptions(cache=False))
    steps = sorted({int(s) for s in ts.table(0)["step"] if s >= 0})
    assert steps and steps[-1] <= 3


def test_runner_reports_a_rank_that_exits():
    with pytest.raises(TracekitError, match="workload run failed on a rank"):
        spawn_ranks(fault_ranks.exits, (), (5,), 2, 2)
