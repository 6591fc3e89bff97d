"""ZeRO-3 and ZeRO-1 on real gloo processes: loss and gradients equal the single-process reference (fp32 and
bf16, 2 and 4 processes, alone and on a tp-sp layout); the traces hold exactly the schedule (per layer two
parameter all-gathers and one gradient reduce-scatter for zero3), every collective on the dp group, attributed
to dp by the analysis (no "unknown"); the overlap variant has collectives in flight together, the plain one never;
activation memory equals the Korthikanti et al. model (parameters gathered by ZeRO are not activations)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import tracekit
from tests.collectors.test_collectors_equivalence import SHAPE, _check
from tests.helpers.tracefile import read
from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch
from tracekit.errors import ConfigError
from tracekit.formats.comm_annotation import parse


def _configs(entries, **extra):
    return [WorkloadConfig(workload=w, overlap=ov, **{**SHAPE, **kw, **extra}) for w, kw in entries for ov in (False, True)]


def _run_and_check(tmp_path, configs, world, rtol, atol, profiled=False):
    results = run_batch([(c, tmp_path / str(i)) for i, c in enumerate(configs)], profiled=profiled, return_state=True)
    for cfg, result in zip(configs, results):
        assert result.world_size == world
        _check(cfg, result, rtol=rtol, atol=atol)
    return results


@pytest.mark.slow
def test_two_processes_fp32_and_bf16(tmp_path):
    fp32 = _configs([("zero3", {}), ("zero1", {})])
    bf16 = _configs([("zero3", {}), ("zero1", {})], dtype="bf16")
    results = run_batch([(c, tmp_path / str(i)) for i, c in enumerate(fp32 + bf16)], profiled=False, return_state=True)
    for cfg, result in zip(fp32 + bf16, results):
        assert result.world_size == 2
        _check(cfg, result, rtol=1e-4 if cfg.dtype == "fp32" else 5e-2, atol=1e-5 if cfg.dtype == "fp32" else 2e-2)


@pytest.mark.slow
def test_four_processes_fp32_and_their_dimensions(tmp_path):
    # zero3 over 4 ranks (uneven: the flat buffer is padded), and sharded over dp on a tp-sp layout (the
    # sequence-parallel LayerNorm gradients are all-reduced over tp before the reduce-scatter); profiled, so the
    # analysis can say which dimension each collective served
    configs = [
        *_configs([("zero3", {"dp": 4, "batch": 4})]),
        WorkloadConfig(workload="tp-sp+zero3", overlap=True, **SHAPE),
        WorkloadConfig(workload="tp+zero1", **SHAPE),
    ]
    results = _run_and_check(tmp_path, configs, 4, rtol=1e-4, atol=1e-5, profiled=True)
    want = [{"dp"}, {"dp"}, {"dp", "sp"}, {"dp", "tp"}]
    for cfg, result, dims in zip(configs, results, want):
        summary = tracekit.analyze(tracekit.load(str(result.out_dir), executor="serial")).to_dict()
        assert {r["dimension"] for r in summary["by_dimension"]} == dims, cfg.workload


def test_bad_combinations_and_delays_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="pick one"):
        WorkloadConfig(workload="dp+zero3").validate()
    for bad in ("1", "x:40", "1:-5", "-1:40", "1:nan", "1:inf", "1:40:2"):
        with pytest.raises(ConfigError, match="RANK:MS") as err:
            WorkloadConfig(workload="dp", delay=bad).validate()
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="rank 2 is not in the run's 2 processes"):
        WorkloadConfig(workload="dp", delay="2:40").validate()
    assert WorkloadConfig(workload="zero3", delay="1:40").delay_spec == (1, 40.0)
    assert WorkloadConfig(workload="zero3").layout().dp == 2


def _events(trace):
    """(ts, issue|wait, op, seq) of the tracekit comm/wait annotations inside each ProfilerStep."""
    xs = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in xs if e["name"].startswith("ProfilerStep#"))
    anns = sorted((e["ts"], a) for e in xs if (a := parse(e["name"])) is not None)
    return [[(ts, a) for ts, a in anns if lo <= ts < hi] for lo, hi in steps]


def _max_in_flight(step) -> int:
    """The most collectives issued and not yet waited for at once (a synchronous call waits inside its issue)."""
    issued, most = set(), 0
    for _, a in step:
        if a.is_wait:
            issued.discard(a.seq)
        else:
            issued.add(a.seq)
            most = max(most, len(issued))
    return most


RUN = dict(
    layers=2, seq=32, hidden=64, heads=4, batch=2, dtype="bf16", dropout=0.1, steps=2, wait=0, warmup=1, activation_memory=True
)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    base = tmp_path_factory.mktemp("zero")
    configs = [WorkloadConfig(workload=w, overlap=o, **RUN) for w in ("zero3", "zero1") for o in (False, True)]
    results = run_batch([(c, base / f"{c.workload}-{c.overlap}") for c in configs])
    return {(c.workload, c.overlap): r for c, r in zip(configs, results)}


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["zero3", "zero1"])
@pytest.mark.parametrize("overlap", [False, True])
def test_traces_hold_the_schedule_on_the_dp_group(profiled, workload, overlap):
    result = profiled[(workload, overlap)]
    layers = RUN["layers"]
    # zero3: each layer gathered before its forward and again before its backward, its gradients scattered;
    # zero1: each layer's gradients scattered, its updated shard gathered back
    want = {("all_gather", 2 * layers if workload == "zero3" else layers), ("reduce_scatter", layers)}
    for path in result.trace_paths:
        steps = _events(read(path))
        assert len(steps) == RUN["steps"]
        for step in steps:
            issues = [a for _, a in step if not a.is_wait]
            assert set(Counter(a.op for a in issues).items()) == want, path
            assert {a.pg_desc for a in issues} == {"tracekit:dp"}
            # plain: every collective waited for before the next is issued; overlap: some in flight together
            assert (_max_in_flight(step) > 1) == overlap, step


@pytest.mark.slow
def test_analysis_attributes_every_collective_to_dp(profiled):
    for (workload, overlap), result in profiled.items():
        summary = tracekit.analyze(tracekit.load(str(result.out_dir), executor="serial")).to_dict()
        rows = summary["by_dimension"]
        assert {r["dimension"] for r in rows} == {"dp"}, (workload, overlap, rows)
        per_rank = (3 if workload == "zero3" else 2) * RUN["layers"] * RUN["steps"]
        assert sum(r["count"] for r in rows) == 2 * per_rank
        assert {c["dimension"] for c in summary["collectives"]} == {"dp"}


@pytest.mark.slow
def test_activation_memory_equals_the_model(profiled):
    s, b, h, a = RUN["seq"], RUN["batch"] // 2, RUN["hidden"], RUN["heads"]  # one dp rank's micro-batch
    want = activation_model(MemoryConfig(s, b, h, a, layernorm_stat_bytes=2)).total_bytes
    for result in profiled.values():
        assert len(result.activation_paths) == 2
        for path in result.activation_paths:
            layers = json.loads(path.read_text())["steps"][-1]["layers"]
            assert [x["measured_bytes"] for x in layers] == [want] * RUN["layers"], path


def test_run_help_lists_every_workload_on_one_line():
    from click.testing import CliRunner

    from tracekit.cli import cli
    from tracekit.collectors.workloads.config import WORKLOAD_HELP, WORKLOADS

    assert set(WORKLOAD_HELP) == set(WORKLOADS)  # a workload added without its line fails here
    out = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200).output
    lines = out.splitlines()
    for w in WORKLOADS:
        (line,) = [x for x in lines if x.split()[:1] == [w]]
        assert WORKLOAD_HELP[w] in line
    assert "--delay RANK:MS" in out


def test_bad_delay_is_a_one_line_usage_error(tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import cli

    result = CliRunner().invoke(cli, ["run", "--workload", "zero3", "--delay", "one:40", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "--delay 'one:40': expected RANK:MS" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
