"""Activation memory of the BUILT-IN layer, measured for real through ``tracekit.profile`` in gloo runs (bf16,
``torch.native_dropout``, dropout 0.1): every rank's every layer equals the Korthikanti et al. model plus the
LayerNorm-statistics term, to the byte, with no parallelism (one process), TP = 2 and TP = 2 + SP, two shapes;
the t in {1, 2, 4} sweep shows the paper's replicated 10 sbh under TP alone and none under TP + SP.

The oracle is ``activation_model`` (closed form) with ``layernorm_stat_bytes=2`` (CPU keeps LayerNorm's mean and
rstd in bf16), configured here from the test's own shapes, not from what the run wrote.
"""

from __future__ import annotations

import json

import pytest

from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch

SHAPES = [(32, 2, 64, 4), (48, 3, 96, 8)]  # (s, b, h, a): two shapes for the exactness check
SWEEP = SHAPES[0]  # the t sweep's shape: heads and the sequence divide by 4 (x 2 chunks for SP)
RUN = dict(layers=2, dtype="bf16", dropout=0.1, steps=1, wait=0, warmup=1, activation_memory=True)


def _cfg(shape, workload, tp):
    s, b, h, a = shape
    return WorkloadConfig(workload=workload, tp=tp, seq=s, batch=b, hidden=h, heads=a, **RUN)


def _jobs():
    """world size -> [(key, config)]: one batch of spawned processes per world size."""
    jobs = {1: [], 2: [], 4: []}
    for shape in SHAPES:
        jobs[1].append(((shape, "tp", 1), _cfg(shape, "tp", 1)))
        for workload in ("tp", "tp-sp"):
            jobs[2].append(((shape, workload, 2), _cfg(shape, workload, 2)))
    for workload in ("tp", "tp-sp"):
        jobs[4].append(((SWEEP, workload, 4), _cfg(SWEEP, workload, 4)))
    return jobs


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """(shape, workload, t) -> {rank: [layer bytes of the last step]}, plus the run directories."""
    base = tmp_path_factory.mktemp("activation")
    out = {}
    for world, jobs in _jobs().items():
        dirs = [base / f"w{world}-{i}" for i in range(len(jobs))]
        results = run_batch([(cfg, d) for (_, cfg), d in zip(jobs, dirs)])
        for (key, _), result in zip(jobs, results):
            assert len(result.activation_paths) == world
            per_rank = {}
            for path in result.activation_paths:
                doc = json.loads(path.read_text())
                per_rank[doc["rank"]] = [x["measured_bytes"] for x in doc["steps"][-1]["layers"]]
            out[key] = (per_rank, result.out_dir)
    return out


def _model(shape, tp, sp) -> int:
    s, b, h, a = shape
    return activation_model(MemoryConfig(s, b, h, a, tp=tp, sp=sp, layernorm_stat_bytes=2)).total_bytes


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=lambda x: "s{}b{}h{}a{}".format(*x))
@pytest.mark.parametrize("workload,tp", [("tp", 1), ("tp", 2), ("tp-sp", 2)])
def test_built_in_layer_measures_the_model_exactly(measured, shape, workload, tp):
    per_rank, _ = measured[(shape, workload, tp)]
    want = _model(shape, tp, workload == "tp-sp")
    assert per_rank == {r: [want, want] for r in range(tp)}


@pytest.mark.slow
def test_run_json_configures_the_same_model(measured):
    """What analyze compares with comes from run.json: it must be the model the test computed itself."""
    from tracekit.analyzers.memory.activation_run import activation_from_dir

    for (shape, workload, tp), (per_rank, out_dir) in measured.items():
        comparison, warnings = activation_from_dir(out_dir)
        assert not warnings
        assert comparison.model.total_bytes == _model(shape, tp, workload == "tp-sp")
        assert {(r.rank, r.layer): r.measured_bytes for r in comparison.layers} == {
            (rank, i): b for rank, layers in per_rank.items() for i, b in enumerate(layers)
        }


def _fit(m1: int, m2: int) -> tuple[int, int]:
    """measured(t) = R + X/t through t = 1 and t = 2: (R, X)."""
    x = 2 * (m1 - m2)
    return m1 - x, x


@pytest.mark.slow
def test_sweep_replicated_term(measured):
    s, b, h, _ = SWEEP
    sbh, ln_stats = s * b * h, 2 * 2 * s * b * 2  # two LayerNorms x (mean, rstd) x s x b x bf16
    at = lambda workload, t: measured[(SWEEP, "tp" if t == 1 else workload, t)][0][0][0]
    for workload in ("tp", "tp-sp"):  # every rank, every layer the same
        for t in (2, 4):
            per_rank = measured[(SWEEP, workload, t)][0]
            assert {x for layers in per_rank.values() for x in layers} == {at(workload, t)}
    rep, shard = _fit(at("tp", 1), at("tp", 2))
    assert rep == 10 * sbh + ln_stats  # TP alone: the LN/dropout/linear-input region stays on every rank
    assert rep + shard // 4 == at("tp", 4)  # and R + X/t predicts t = 4 to the byte
    rep_sp, shard_sp = _fit(at("tp-sp", 1), at("tp-sp", 2))
    assert rep_sp == 0 and shard_sp == at("tp", 1) and shard_sp // 4 == at("tp-sp", 4)  # TP + SP: all / t


@pytest.mark.slow
def test_tracekit_run_then_analyze_reports_measured_equal_model(tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import cli

    s, b, h, a = SHAPES[0]
    run = CliRunner().invoke(
        cli,
        [
            "run",
            "--workload",
            "tp-sp",
            "--activation-memory",
            "--dtype",
            "bf16",
            "--layers",
            "1",
            "--steps",
            "1",
            "--seq",
            str(s),
            "--batch",
            str(b),
            "--hidden",
            str(h),
            "--heads",
            str(a),
            "--out",
            str(tmp_path),
        ],
    )
    assert run.exit_code == 0, run.output
    want = _model(SHAPES[0], 2, True)
    assert f"{want:>12,} {want:>12,} {0:>+9,}" in run.output  # the summary's measured / model / delta row
    out = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["activation_memory"]["layers"]
    assert [(r["rank"], r["layer"], r["measured_bytes"], r["model_bytes"]) for r in rows] == [
        (0, 0, want, want),
        (1, 0, want, want),
    ]
