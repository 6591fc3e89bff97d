"""Every workload, plain and overlapped, on 2 and 4 gloo processes: loss and gradients equal a single-process
reference built from torch built-ins (SDPA attention) with the same weights and input."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.layer_reference import expected_shard, reference
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch

SHAPE = dict(layers=2, seq=32, hidden=32, heads=8, batch=2, dropout=0.0, steps=1)
TWO = ["tp", "tp-sp", "cp-ring", "ulysses", "dp"]
FOUR = [("tp-sp+cp-ring", {}), ("tp+dp", {}), ("tp+ulysses", {}), ("cp-ring", {"cp": 4}), ("tp-sp+dp", {}), ("ulysses+dp", {})]


def _configs(entries, **extra):
    return [WorkloadConfig(workload=w, overlap=ov, **kw, **SHAPE, **extra) for w, kw in entries for ov in (False, True)]


def _check(cfg, result, rtol, atol):
    ref_loss, ref_grads = reference(cfg)
    assert result.losses[0] == pytest.approx(ref_loss, rel=rtol), cfg
    lay = cfg.layout()
    for state in result.states:
        want = expected_shard(ref_grads, cfg.layers, lay.tp, state["coords"][2])
        assert set(state["grads"]) == set(want)
        for name, got in state["grads"].items():
            np.testing.assert_allclose(
                got,
                want[name].numpy(),
                rtol=rtol,
                atol=atol,
                err_msg=f"{cfg.workload} overlap={cfg.overlap} rank {state['rank']} {name}",
            )


@pytest.mark.slow
def test_two_processes_fp32(tmp_path):
    configs = _configs([(w, {}) for w in TWO])
    results = run_batch([(c, tmp_path / str(i)) for i, c in enumerate(configs)], profiled=False, return_state=True)
    for cfg, result in zip(configs, results):
        assert result.world_size == 2
        _check(cfg, result, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_four_processes_fp32(tmp_path):
    configs = _configs(FOUR)
    results = run_batch([(c, tmp_path / str(i)) for i, c in enumerate(configs)], profiled=False, return_state=True)
    for cfg, result in zip(configs, results):
        assert result.world_size == 4
        _check(cfg, result, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_bf16_within_bf16_tolerance(tmp_path):
    configs = _configs([("tp-sp", {}), ("cp-ring", {})], dtype="bf16")
    results = run_batch([(c, tmp_path / str(i)) for i, c in enumerate(configs)], profiled=False, return_state=True)
    for cfg, result in zip(configs, results):
        _check(cfg, result, rtol=5e-2, atol=2e-2)
