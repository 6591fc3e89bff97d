"""The pp workload (1F1B over gloo link groups) matches the single-process reference: loss and every stage's
gradients, plain and overlapped, fp32 and bf16, 2 and 4 stages, and combined with dp and tp-sp."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.layer_reference import expected_shard, reference
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch

SHAPE = dict(layers=2, seq=32, hidden=32, heads=8, batch=4, dropout=0.0, steps=1, microbatches=4)


def _check(cfg, result, rtol, atol):
    ref_loss, ref_grads = reference(cfg)
    assert result.losses[0] == pytest.approx(ref_loss, rel=rtol), cfg
    lay = cfg.layout()
    per = cfg.layers // lay.pp
    seen: set[str] = set()
    for state in result.states:
        want = expected_shard(ref_grads, cfg.layers, lay.tp, state["coords"][2])
        stage = state["stage"]
        assert set(state["grads"]) == {n for n in want if int(n.split(".")[0]) // per == stage}
        seen |= set(state["grads"])
        for name, got in state["grads"].items():
            np.testing.assert_allclose(
                got,
                want[name].numpy(),
                rtol=rtol,
                atol=atol,
                err_msg=f"{cfg.workload} overlap={cfg.overlap} rank {state['rank']} {name}",
            )
    assert seen == set(ref_grads)  # every layer lives on some stage


def _run(tmp_path, configs):
    return run_batch([(c, tmp_path / str(i)) for i, c in enumerate(configs)], profiled=False, return_state=True)


@pytest.mark.slow
def test_two_stages_fp32_and_bf16(tmp_path):
    configs = [
        WorkloadConfig(workload="pp", overlap=ov, dtype=dt, **SHAPE)
        for dt, ov in (("fp32", False), ("fp32", True), ("bf16", True))
    ]
    for cfg, result in zip(configs, _run(tmp_path, configs)):
        assert result.world_size == 2
        assert [p["stage"] for p in result.pipeline] == [0, 1]
        _check(cfg, result, *((1e-4, 1e-5) if cfg.dtype == "fp32" else (5e-2, 2e-2)))


@pytest.mark.slow
def test_four_processes(tmp_path):
    """Four stages (overlapped, counting the activations each stage holds: p - s under 1F1B), and two stages
    combined with dp (overlapped: buckets launch in the last microbatch's backward) and with tp-sp (plain)."""
    entries = [
        ("pp", dict(SHAPE, pp=4, layers=4, activation_memory=True), True),
        ("pp+dp", dict(SHAPE, batch=8), True),
        ("tp-sp+pp", SHAPE, False),
    ]
    configs = [WorkloadConfig(workload=w, overlap=ov, **kw) for w, kw, ov in entries]
    results = _run(tmp_path, configs)
    for cfg, result in zip(configs, results):
        assert result.world_size == 4
        _check(cfg, result, rtol=1e-4, atol=1e-5)
    held = {p["stage"]: p for p in results[0].pipeline}
    assert [held[s]["peak_in_flight"] for s in range(4)] == [4, 3, 2, 1]
    for s in range(3):  # equal microbatches: the peak is p - s of them, byte for byte
        assert held[s]["peak_in_flight_bytes"] == (4 - s) * held[s]["microbatch_bytes"][0] > 0
