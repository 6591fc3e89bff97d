"""Flight Recorder dumps recorded here, by real gloo runs: three hangs made for real and a healthy run
(tests/helpers/flight_cases.py, 3 ranks, 2 s timeout), and a reference workload under ``tracekit run
--flight-recorder`` with a known straggler. ``tracekit hang`` must name exactly the injected rank; PyTorch's own
analyzer (torchfrtrace) is the independent reference where it runs; the workload's dumps must agree with its
Kineto traces on the common collectives, per dimension."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers.flight_cases import INJECTED, record
from tracekit.cli import cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("flight")
    out = {}
    for case in INJECTED:
        results = record(case, base / case)
        assert len(results) == 3 and all(r["dump"] for r in results), results
        out[case] = base / case
    return out


def _hang(path: Path) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["hang", str(path), "--format", "json"])
    return res.exit_code, json.loads(res.output)


@pytest.mark.parametrize("case", sorted(INJECTED))
def test_hang_names_exactly_the_injected_rank(cases, case):
    for folder in (cases[case], cases[case] / "json", cases[case] / "stacks"):
        code, d = _hang(folder)
        assert [s["rank"] for s in d["suspect_ranks"]] == list(INJECTED[case]), (folder, d["evidence"])
        assert code == (1 if INJECTED[case] else 0)


def _torchfrtrace(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(folder), "--prefix", "_dump_"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _with_pg_config(folder: Path, out: Path) -> Path:
    """A copy of the pickle dumps with ``pg_config`` filled from the run.json the collector wrote (the groups as
    torch.distributed listed them to rank 0), which gloo's dumps leave empty."""
    groups = json.loads((folder / "run.json").read_text())["process_groups"]
    config = {g["name"]: {"name": g["name"], "desc": g["desc"], "ranks": str(g["ranks"])} for g in groups}
    out.mkdir()
    for dump in folder.glob("_dump_*"):
        d = pickle.loads(dump.read_bytes())  # our own files from the run above: trusted
        d["pg_config"] = config
        (out / dump.name).write_bytes(pickle.dumps(d))
    return out


def test_torchfrtrace_fails_on_gloo_dumps_as_torch_writes_them(cases, tmp_path):
    """torch 2.13's gloo leaves pg_config empty, and the reference analyzer stops with a KeyError (docs/analyze.md)."""
    flat = tmp_path / "flat"
    flat.mkdir()
    for dump in cases["skip"].glob("_dump_*"):  # torchfrtrace walks subfolders too: the pickles alone
        (flat / dump.name).write_bytes(dump.read_bytes())
    res = _torchfrtrace(flat)
    assert res.returncode != 0 and "KeyError" in res.stderr


def test_torchfrtrace_agrees_once_it_knows_the_groups(cases, tmp_path):
    skip = _torchfrtrace(_with_pg_config(cases["skip"], tmp_path / "skip"))
    assert skip.returncode == 0 and "Not all ranks joining collective" in skip.stdout + skip.stderr
    assert "missing ranks: {2}" in skip.stdout + skip.stderr
    size = _torchfrtrace(_with_pg_config(cases["size"], tmp_path / "size"))
    assert "Culprit rank 2" in size.stdout + size.stderr and "missing ranks: {2}" in size.stdout + size.stderr
    for case in ("ok", "sleep"):  # a rank late past the timeout is no finding for torchfrtrace (it reads no times)
        res = _torchfrtrace(_with_pg_config(cases[case], tmp_path / case))
        out = res.stdout + res.stderr
        assert res.returncode == 0 and "missing ranks" not in out and "Culprit" not in out


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("workload") / "run"
    cmd = [sys.executable, "-m", "tracekit", "run", "--workload", "tp-sp+dp", "--layers", "1", "--steps", "3"]
    cmd += ["--delay", "3:40", "--flight-recorder", "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "flight recorder dumps: 4" in res.stdout
    return out


def test_the_reference_workload_is_consistent(workload):
    code, d = _hang(workload)
    assert code == 0 and d["suspect_ranks"] == [] and {g["membership"] for g in d["groups"]} <= {"run.json", "world"}
    assert {g["dimension"] for g in d["groups"]} == {"world", "sp", "dp"}


def test_flight_timings_agree_with_the_kineto_traces(workload):
    res = CliRunner().invoke(cli, ["analyze", str(workload), "--flight", "--format", "json", "--no-cache"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    k = d["kineto"]
    assert k["common"] == k["kineto_collectives"] > 0 and k["op_mismatches"] == 0
    assert len(set(k["seq_offsets"].values())) >= 1
    assert {x["dimension"] for x in k["dimensions"]} == {"sp", "dp", "all"}
    for x in k["dimensions"]:
        assert x["flight_wait_us"] == pytest.approx(x["kineto_wait_us"], rel=0.2), x
        assert x["median_abs_diff_us"] < 500 and x["last_arrival_agreement"] >= 0.7, x
        if x["dimension"] == "dp":
            # rank 3's sp peer (rank 2) waits out the delay inside sp and so reaches dp as late as rank 3 does: in dp
            # the two are a tie that the host's load decides, in both readings alike
            assert {x["flight_straggler"], x["kineto_straggler"]} <= {2, 3}, x
        else:
            assert x["flight_straggler"] == x["kineto_straggler"] == 3, x  # the delayed rank, by both
    # the Kineto analysis's own straggler (tracekit.summary/1) is the same rank
    summary = CliRunner().invoke(cli, ["analyze", str(workload), "--format", "json", "--no-cache"])
    assert json.loads(summary.output)["stragglers"][0]["rank"] == 3


def test_torchfrtrace_blames_whoever_differs_from_the_first_file_it_reads(tmp_path):
    """Hand-built: one rank of three all-reduces another size. torchfrtrace takes the first dump in directory
    order as right; when that is the odd one, it blames the other two. tracekit takes the strict majority."""
    import os

    from tests.helpers.flight import dump, entry, ring, write_dumps

    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}}
    write_dumps(tmp_path, {r: dump(ring(4), pg_config=cfg) for r in range(3)})
    first = int(os.listdir(tmp_path)[0].rsplit("_", 1)[1])  # the order os.walk gives torchfrtrace
    write_dumps(tmp_path, {first: dump([*ring(2), entry(3, sizes=((16,),)), *ring(4)[3:]], pg_config=cfg)})
    out = _torchfrtrace(tmp_path)
    blamed = {int(r) for r in __import__("re").findall(r"Culprit rank (\d+)", out.stdout + out.stderr)}
    assert blamed == {0, 1, 2} - {first}
    code, d = _hang(tmp_path)
    assert [s["rank"] for s in d["suspect_ranks"]] == [first] and d["mismatches"][0]["odd_ranks"] == [first]
