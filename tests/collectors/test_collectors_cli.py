"""`tracekit run` on 4 processes (TP+SP x CP ring, overlapped): traces, manifest and the summary."""

from __future__ import annotations

from collections import Counter

import pytest
from click.testing import CliRunner

from tests.helpers.tracefile import comm_by_step, read
from tracekit.cli import cli
from tracekit.collectors.manifest import read as read_manifest


@pytest.mark.slow
def test_run_tp_sp_cp_ring_on_four_processes(tmp_path):
    args = [
        "run",
        "--workload",
        "tp-sp+cp-ring",
        "--tp",
        "2",
        "--cp",
        "2",
        "--layers",
        "1",
        "--seq",
        "32",
        "--hidden",
        "32",
        "--heads",
        "4",
        "--steps",
        "1",
        "--overlap",
        "--out",
        str(tmp_path),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "traces: 4 in" in result.output and "sp" in result.output
    manifest = read_manifest(tmp_path / "run.json")
    assert manifest["layout"]["tp"] == 2 and manifest["layout"]["cp"] == 2
    assert sorted(g["dimension"] for g in manifest["process_groups"]) == ["cp", "cp", "dp", "dp", "sp", "sp"]
    for rank in range(4):
        (anns,) = comm_by_step(read(tmp_path / f"rank{rank}.trace.json.gz"))
        dims = Counter(a.pg_desc for a in anns)
        # sp: 2x2 chunked all-gathers + 2x2 chunked reduce-scatters forward; backward 2 all-gathers (proj, FC2
        # gradients), 2 re-gathers of the saved QKV/FC1 input shards, 2 reduce-scatters; 1 LayerNorm;
        # cp: one K/V shift forward and one backward; dp (the cp ranks): 3 gradient buckets
        assert dims == {"tracekit:sp": 15, "tracekit:cp": 2, "tracekit:dp": 3}


def test_bad_layout_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["run", "--workload", "ulysses", "--cp", "3", "--heads", "8", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "heads" in result.output
