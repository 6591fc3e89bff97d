"""The same `tracekit run` under torchrun (the GPU path's launcher), here with gloo on CPU: every rank writes
its trace, rank 0 alone summarises once all traces are in place."""

import subprocess
import sys
from pathlib import Path

import pytest

import tracekit

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_tracekit_run_under_torchrun(tmp_path):
    out = tmp_path / "tr"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "tracekit",
        "run",
        "--workload",
        "tp-sp",
        "--tp",
        "2",
        "--steps",
        "2",
        "--out",
        str(out),
    ]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert sorted(p.name for p in out.glob("rank*.trace.json.gz")) == ["rank0.trace.json.gz", "rank1.trace.json.gz"]
    assert r.stdout.count("(per step; details: tracekit analyze") == 1  # one summary, from rank 0
    assert "rank 1: trace written" in r.stdout
    summary = tracekit.analyze(tracekit.load(str(out), executor="serial")).to_dict()
    assert summary["run"]["workload"] == "tp-sp" and {d["dimension"] for d in summary["by_dimension"]} == {"sp"}
    assert all(c["wait_us"] is not None for c in summary["collectives"])
