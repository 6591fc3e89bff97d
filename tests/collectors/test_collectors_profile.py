"""tracekit.profile in one process: files written, ranks selection, and an export failure that does not stop
training."""

from __future__ import annotations

import logging

import torch

import tracekit
from tracekit.collectors.manifest import read as read_manifest

from tracefile import read


def _train(p, steps):
    w = torch.randn(16, 16, requires_grad=True)
    for _ in range(steps):
        (torch.randn(8, 16) @ w).sum().backward()
        p.step()
    return steps


def test_writes_trace_and_manifest(tmp_path):
    with tracekit.profile(tmp_path, wait=1, warmup=1, active=2, model={"hidden": 16}) as p:
        _train(p, 5)
    trace = read(tmp_path / "rank0.trace.json.gz")
    steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    manifest = read_manifest(tmp_path / "run.json")
    assert manifest["world_size"] == 1 and manifest["model"] == {"hidden": 16}
    assert manifest["schedule"] == {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}
    over = manifest["profiler_overhead"]
    assert over["profiled_steps"] == 2 and over["steps"] == 5 and over["export_ns"] > 0


def test_unselected_rank_writes_no_trace(tmp_path):
    with tracekit.profile(tmp_path, wait=0, warmup=0, active=1, ranks=[1]) as p:
        _train(p, 2)
    assert not list(tmp_path.glob("*.trace.json.gz"))
    assert read_manifest(tmp_path / "run.json")["profiled_ranks"] == [1]


def test_export_failure_is_a_warning(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="tracekit.profile"):
        with tracekit.profile(blocker / "out", wait=0, warmup=0, active=1) as p:
            done = _train(p, 3)
    assert done == 3
    assert p.trace_paths == []
    assert any("could not write" in r.getMessage() for r in caplog.records)
