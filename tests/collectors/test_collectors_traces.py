"""Profiled runs on 2 gloo processes: each workload's collectives per step, counted and sized from the layer
shapes, every one attributed to its dimension; the manifest names every group the traces mention."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.helpers.tracefile import comm_by_step, gloo_spans, read
from tracekit.collectors.manifest import read as read_manifest
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.collectors.workloads.runner import run_batch

L, S, B, H, A = 2, 32, 2, 32, 4
SHAPE = dict(layers=L, seq=S, batch=B, hidden=H, heads=A, steps=2, wait=1, warmup=1, dropout=0.1)
PARAMS = L * (12 * H * H + 4 * H)  # per layer: qkv 3h², proj h², fc1 4h², fc2 4h², two LayerNorms 4h


def expected(workload: str, overlap: bool) -> Counter:
    """(dimension, op, in elements, out elements) -> count per step on each rank (dp buckets: (dp, op)).
    Overlap variants cut the sequence (or the heads, for Ulysses) in k = 2 chunks, one collective each."""
    k, sbh, c = (2 if overlap else 1), S * B * H, Counter()
    if workload == "tp":  # forward: proj and FC2 outputs (chunked); backward: QKV and FC1 input gradients
        c[("tp", "all_reduce", sbh // k, sbh // k)] += 2 * L * k
        c[("tp", "all_reduce", sbh, sbh)] += 2 * L
    elif workload == "tp-sp":  # two all-gathers and two reduce-scatters of s*b*h per layer, each way
        c[("sp", "all_gather", sbh // 2 // k, sbh // k)] += 2 * L * k  # forward, before QKV and FC1
        c[("sp", "reduce_scatter", sbh // k, sbh // 2 // k)] += 2 * L * k  # forward, after proj and FC2
        c[("sp", "all_gather", sbh // 2, sbh)] += 2 * L  # backward of proj and FC2
        c[("sp", "all_gather", sbh // 2, sbh)] += 2 * L  # backward of QKV and FC1: their saved input shard again
        c[("sp", "reduce_scatter", sbh, sbh // 2)] += 2 * L  # backward of QKV and FC1
        c[("sp", "all_reduce", 4 * H * L, 4 * H * L)] += 1  # sequence-parallel LayerNorm gradients
    elif workload == "cp-ring":  # K and V of s/2 tokens: cp-1 = 1 shift forward, 1 backward, per layer
        c[("cp", "send_recv", sbh, sbh)] += 2 * L
    elif workload == "ulysses":  # q,k,v sequence->heads and the context back, forward and backward
        c[("ulysses", "all_to_all", 3 * sbh // 2 // k, 3 * sbh // 2 // k)] += 2 * L * k
        c[("ulysses", "all_to_all", sbh // 2 // k, sbh // 2 // k)] += 2 * L * k
    if workload in ("cp-ring", "ulysses", "dp"):  # buckets of about half a layer: [fc2] [fc1 ln2 proj] [qkv ln1]
        c[("dp", "all_reduce")] += 3 * L
    return c


def _key(a):
    dim = a.pg_desc.removeprefix("tracekit:")
    return (dim, a.op) if a.op == "all_reduce" and dim == "dp" else (dim, a.op, a.in_nelems, a.out_nelems)


CASES = [
    ("tp", False),
    ("tp", True),
    ("tp-sp", False),
    ("tp-sp", True),
    ("cp-ring", False),
    ("cp-ring", True),
    ("ulysses", False),
    ("ulysses", True),
    ("dp", False),
    ("dp", True),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("traces")
    configs = [WorkloadConfig(workload=w, overlap=ov, **SHAPE) for w, ov in CASES]
    return list(zip(configs, run_batch([(c, base / f"{c.workload}-{c.overlap}") for c in configs])))


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{w}-{'overlap' if o else 'plain'}" for w, o in CASES])
def test_collectives_per_step(runs, index):
    cfg, result = runs[index]
    assert [p.name for p in result.trace_paths] == ["rank0.trace.json.gz", "rank1.trace.json.gz"]
    for path in result.trace_paths:
        trace = read(path)
        steps = comm_by_step(trace)
        assert len(steps) == cfg.steps
        for anns in steps:
            assert Counter(_key(a) for a in anns) == expected(cfg.workload, cfg.overlap), (cfg.workload, cfg.overlap)
            assert all(a.pg_desc.startswith("tracekit:") and a.seq >= 0 for a in anns)
            if cfg.workload in ("cp-ring", "ulysses", "dp"):
                dp_elems = sum(a.in_nelems for a in anns if a.pg_desc == "tracekit:dp")
                assert dp_elems == PARAMS
        # one gloo worker span per annotated collective, on gloo's own threads
        n_comm = sum(len(s) for s in steps)
        spans = gloo_spans(trace)
        assert len(spans) >= n_comm and {e["tid"] for e in spans}.isdisjoint(
            {e["tid"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}
        )


@pytest.mark.slow
def test_manifest_names_every_group(runs):
    for _cfg, result in runs:
        manifest = read_manifest(result.manifest_path)
        assert manifest["world_size"] == 2 and manifest["backend"] == "gloo"
        assert manifest["model"]["hidden"] == H and manifest["versions"]["torch"]
        groups = {g["name"]: g for g in manifest["process_groups"]}
        for path in result.trace_paths:
            for anns in comm_by_step(read(path)):
                for a in anns:
                    g = groups[a.pg_name]
                    assert g["desc"] == a.pg_desc and g["ranks"] == list(a.ranks_tuple)
                    assert manifest["group_dimensions"][a.pg_name] == g["dimension"] == a.pg_desc[len("tracekit:") :]
