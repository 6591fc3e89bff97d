"""Bounded outputs: the summary keeps the most exposed collective instances up to a limit (with the count of the
rest, flagged by a warning), `--collectives-out` writes every instance to Parquet, and the aggregates and the gate
do not depend on how many rows were kept."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import tracekit
from tests.helpers.data import gpu_trace
from tracekit.analyzers.summary_schema import collectives_frame
from tracekit.cli import cli
from tracekit.formats.summary import as_dict, read_summary
from tracekit.gate.metrics import RunMetrics

TRACE = "allreduce-broadcast-2rank-rank0.json.gz"


@pytest.fixture(scope="module")
def analysis():
    return tracekit.analyze(tracekit.load(gpu_trace(TRACE), options=tracekit.LoadOptions(cache=False)))


def test_below_the_limit_every_instance_is_kept(analysis):
    s = analysis.to_dict()
    n = len(analysis.comm.instances.columns["rank"])
    assert n > 10 and len(s["collectives"]) == n
    assert s["collectives_limit"] == {"limit": 20000, "total": n, "omitted": 0}
    assert not any("collectives_limit" in w for w in s["warnings"])


def test_over_the_limit_the_most_exposed_are_kept_in_order(analysis, monkeypatch):
    full = analysis.to_dict()
    monkeypatch.setenv("TRACEKIT_MAX_COLLECTIVE_ROWS", "5")
    s = analysis.to_dict()
    rows, every = s["collectives"], full["collectives"]
    assert len(rows) == 5 and s["collectives_limit"] == {"limit": 5, "total": len(every), "omitted": len(every) - 5}
    # oracle: sort the full list by exposed time, ties in list order (rank, start), and take five
    want = sorted(range(len(every)), key=lambda i: (-every[i]["exposed_us"], i))[:5]
    assert rows == [every[i] for i in sorted(want)]
    assert min(r["exposed_us"] for r in rows) >= max(every[i]["exposed_us"] for i in range(len(every)) if i not in want)
    assert any("collectives_limit" in w and "--collectives-out" in w for w in s["warnings"])
    for key in ("by_dimension", "by_process_group", "ranks"):  # aggregates cover every instance either way
        assert s[key] == full[key]


def test_a_bounded_summary_reads_back_and_the_gate_uses_the_totals(analysis, monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEKIT_MAX_COLLECTIVE_ROWS", "5")
    s = analysis.to_dict()
    p = tmp_path / "s.json"
    p.write_text(json.dumps(s))
    back = as_dict(read_summary(p))
    assert back["collectives_limit"]["omitted"] == s["collectives_limit"]["omitted"]
    metrics = RunMetrics(back)
    assert metrics.collectives == []  # a subset would bias per-step figures: the totals are used instead
    assert metrics.scopes()


@pytest.mark.parametrize(
    "traces", [[TRACE], ["pp-sendrecv-128rank-rank0.json.gz", "pp-sendrecv-128rank-rank1.json.gz"]], ids=["one rank", "two ranks"]
)
def test_the_full_table_equals_the_unbounded_rows(analysis, traces):
    """One definition of a row: the Parquet table `--collectives-out` writes reads back equal to the summary's
    rows, value for value (exact floats, null where one rank has no wait/transfer/skew, Python types)."""
    a = (
        analysis
        if traces == [TRACE]
        else tracekit.analyze(tracekit.load([gpu_trace(t) for t in traces], options=tracekit.LoadOptions(cache=False)))
    )
    rows = a.to_dict()["collectives"]
    table = pa.Table.from_pandas(collectives_frame(a.comm), preserve_index=False)
    assert len(rows) >= 10 and table.to_pylist() == rows
    assert json.dumps(table.to_pylist()) == json.dumps(rows)  # same key order, same types (int stays int)
    multi = len(traces) > 1
    assert a.comm.multi_rank == multi and any(r["wait_us"] is not None for r in rows) == multi


def test_cli_collectives_out_writes_every_instance(analysis, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_MAX_COLLECTIVE_ROWS", "5")
    out, summary = tmp_path / "c.parquet", tmp_path / "s.json"
    res = CliRunner().invoke(
        cli, ["analyze", gpu_trace(TRACE), "--no-cache", "--format", "json", "--out", str(summary), "--collectives-out", str(out)]
    )
    assert res.exit_code == 0, res.output
    table = pq.read_table(out)
    s = json.loads(summary.read_text())
    assert table.num_rows == s["collectives_limit"]["total"] == len(analysis.comm.instances.columns["rank"])
    assert len(s["collectives"]) == 5
    assert table.schema.metadata[b"schema"] == b"tracekit.collectives/1"
    assert table.column_names == list(s["collectives"][0])
