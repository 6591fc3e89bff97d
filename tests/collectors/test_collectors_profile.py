"""tracekit.profile in one process: files written, ranks selection, and an export failure that does not stop
training."""

from __future__ import annotations

import logging

import torch

import tracekit
from tests.helpers.tracefile import read
from tracekit.collectors.manifest import read as read_manifest


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


class _TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)])

    def forward(self, x):
        return self.layers[1](torch.relu(self.layers[0](x)))


def test_activation_memory_per_layer_and_peaks(tmp_path):
    import json

    torch.manual_seed(0)
    net, x = _TwoLayers(), torch.randn(4, 16, requires_grad=True)
    dims = {"seq": 4, "batch": 1, "hidden": 16, "heads": 1}
    with tracekit.profile(
        tmp_path, wait=1, warmup=0, active=2, activation_memory=True, model=net, layers="layers", model_dims=dims
    ) as p:
        for _ in range(4):
            net(x).sum().backward()
            p.step()
    doc = json.loads((tmp_path / "activation_r0.json").read_text())
    assert doc["schema"] == "tracekit.activation_memory/1" and doc["rank"] == 0 and len(doc["steps"]) == 4
    # by hand, fp32: layer 0's addmm saves x (4x16); relu, run by the top-level module outside any layer,
    # saves its output (4x32), which layer 1's addmm saves again: one storage, counted once, where first saved
    per_step = [(s["step"], [x["measured_bytes"] for x in s["layers"]], s["outside_layers_bytes"]) for s in doc["steps"]]
    assert per_step == [(i, [4 * 16 * 4, 0], 4 * 32 * 4) for i in range(4)]
    # peaks only where the profiler recorded (steps 1 and 2), and at least what the step allocated for grads
    peaks = [s["peak_over_start_bytes"] for s in doc["steps"]]
    assert peaks[0] is None and peaks[3] is None and min(peaks[1:3]) >= 4 * 32 * 4
    assert doc["peak_source"] == "profiler"
    manifest = read_manifest(tmp_path / "run.json")
    assert manifest["model"] == dims and manifest["activation_memory"] is True


def test_activation_memory_without_a_module_is_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="tracekit.profile"):
        with tracekit.profile(tmp_path, wait=0, warmup=0, active=1, activation_memory=True) as p:
            _train(p, 1)
    assert not list(tmp_path.glob("activation_r*.json"))
    assert any("needs model=" in r.getMessage() for r in caplog.records)


def test_a_layout_mapping_is_recorded_as_given(tmp_path):
    layout = {"tp": 2, "dp": 2, "dp_shard": 1}
    with tracekit.profile(tmp_path, wait=0, warmup=0, active=1, ranks=[1], layout=layout) as p:
        _train(p, 1)
    assert read_manifest(tmp_path / "run.json")["layout"] == layout and not p.problems


def test_a_malformed_layout_mapping_is_a_problem_not_a_failure(tmp_path):
    with tracekit.profile(tmp_path, wait=0, warmup=0, active=1, ranks=[1], layout={"tp": 0}) as p:
        _train(p, 1)
    assert p.problems == ["profile(layout=...): tp=0 must be >= 1; recorded in the run manifest as given"]
    assert read_manifest(tmp_path / "run.json")["layout"] == {"tp": 0}
