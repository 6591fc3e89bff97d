"""The ep workload's traces, analysed: every collective attributed (dp or ep, never unknown), the all-to-all
bytes the summary reports equal to the split sizes the routing logged (ep_splits_r{rank}.jsonl), routing
imbalance visible in those bytes, and the activation memory each MoE layer saves equal to a formula of the
logged row counts."""

from __future__ import annotations

import json

import pytest

import tracekit
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch

SHAPE = dict(
    layers=1,
    seq=32,
    hidden=32,
    heads=8,
    batch=2,
    steps=2,
    wait=1,
    warmup=1,
    dropout=0.0,
    experts=4,
    top_k=2,
    capacity_factor=1.25,
    activation_memory=True,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("ep")
    jobs = [
        (WorkloadConfig(workload="ep", overlap=False, **SHAPE), base / "plain"),
        (WorkloadConfig(workload="ep", overlap=True, **SHAPE), base / "overlap"),
        (WorkloadConfig(workload="dp", **SHAPE), base / "dense"),
    ]
    results = run_batch(jobs)
    return {
        name: (cfg, result, tracekit.analyze(tracekit.load(str(out), executor="serial")).to_dict())
        for (cfg, out), result, name in zip(jobs, results, ("plain", "overlap", "dense"))
    }


def _log(result) -> list[dict]:
    return [
        json.loads(line)
        for r in range(result.world_size)
        for line in (result.out_dir / f"ep_splits_r{r}.jsonl").read_text().splitlines()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "overlap"])
def test_every_collective_is_attributed(runs, variant):
    _, result, summary = runs[variant]
    assert {g["dimension"] for g in summary["by_process_group"]} == {"dp", "ep"}
    assert {(c["dimension"], c["op"]) for c in summary["collectives"]} == {("dp", "all_reduce"), ("ep", "all_to_all")}
    manifest = json.loads(result.manifest_path.read_text())
    assert manifest["layout"]["ep"] == 2 and {"ep", "dp"} <= set(manifest["group_dimensions"].values())


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "overlap"])
def test_all_to_all_bytes_are_the_logged_split_sizes(runs, variant):
    cfg, result, summary = runs[variant]
    logged = {(e["rank"], e["pg_name"], e["seq"]): e for e in _log(result)}
    ep = [c for c in summary["collectives"] if c["dimension"] == "ep"]
    # per profiled step and layer: the counts exchange, then dispatch, combine and their two gradients per chunk
    assert len(ep) == result.world_size * cfg.steps * cfg.layers * (1 + 4 * (cfg.chunks if cfg.overlap else 1))
    for c in ep:
        e = logged[(c["rank"], c["pg_name"], c["seq"])]
        assert c["bytes"] == max(sum(e["in_split"]), sum(e["out_split"])) * e["row_bytes"], e
        assert c["wait_us"] is not None
    dispatch = [(c, logged[(c["rank"], c["pg_name"], c["seq"])]) for c in ep]
    dispatch = [(c, e) for c, e in dispatch if e["phase"] == "dispatch"]
    assert any(sum(e["in_split"]) != sum(e["out_split"]) for _, e in dispatch), "no routing imbalance to see"
    assert any(len(set(e["in_split"])) > 1 for _, e in dispatch), "a rank must send unequal rows to its peers"


def _saved(result, step: int) -> dict[int, int]:
    out = {}
    for path in result.activation_paths:
        doc = json.loads(path.read_text())
        out[doc["rank"]] = next(s for s in doc["steps"] if s["step"] == step)["layers"][0]["measured_bytes"]
    return out


@pytest.mark.slow
def test_moe_activation_memory_follows_the_logged_rows(runs):
    """A rank's MoE layer saves, beyond the dense layer's attention part, per local token T: the router input
    (the same storage the dense MLP saves), its probabilities (E fp32) and choices (k int64); per sent row N: its
    token and choice indices (2 int64), its combined output (h) and gate (fp32); per received row R: the row and
    the expert's 4h pre-activation. The dense MLP saves 4h twice per token (GELU input, FC2 input) instead."""
    cfg, result, _ = runs["plain"]
    _, dense, _ = runs["dense"]
    e, h, E, k = 4, cfg.hidden, cfg.experts, cfg.top_k
    tokens = cfg.seq * cfg.batch // 2
    step = cfg.wait + cfg.warmup + cfg.steps - 1
    moe, base = _saved(result, step), _saved(dense, step)
    for entry in _log(result):
        if entry["phase"] != "dispatch" or entry["step"] != step:
            continue
        n, r = sum(entry["in_split"]), sum(entry["out_split"])
        extra = tokens * (E * 4 + k * 8) + n * (2 * 8 + h * e + 4) + r * 5 * h * e - tokens * 2 * 4 * h * e
        assert moe[entry["rank"]] - base[entry["rank"]] == extra, entry
