"""Truncated traces (a job killed while writing): cut real traces at 30/50/70/90/99 % of their inflated bytes, gz
and plain, alone and as one rank of a pair. Every step the analysis calls complete has exactly the intact trace's
figures; the others are marked with a reason; `tracekit check` never passes a budget or a baseline that the
intact trace fails; a rank that lost its clock moves no other rank's numbers.

Traces: a real NCCL trace (tests/data/kineto-gpu, its baseTimeNanoseconds comes after the events) and a real
2-rank gloo run of the project's own TP+SP workload, recorded once per module."""

from __future__ import annotations

import copy
import gzip
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers.data import gpu_trace
from tracekit.analyzers import analyze
from tracekit.cli import cli
from tracekit.loader.loading import LoadOptions, load

pytestmark = pytest.mark.slow  # cuts real traces at hundreds of offsets

CUTS = (0.3, 0.5, 0.7, 0.9, 0.99)
GPU = gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")
CROSS = ("wait_us", "transfer_us", "skew_us", "algbw_gbps", "busbw_gbps")


def summary(path) -> dict:
    return analyze(load(str(path), options=LoadOptions(cache=False), executor="serial"), allow_empty=True).to_dict()


def inflated(path: str) -> bytes:
    with open(path, "rb") as fh:
        raw = fh.read()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def write_cut(raw: bytes, frac: float, dst: Path, gz: bool) -> Path:
    data = raw[: int(len(raw) * frac)]
    dst.write_bytes(gzip.compress(data) if gz else data)
    return dst


def steps_of(d: dict, rank: int) -> dict:
    return {s["step"]: s for r in d["ranks"] if r["rank"] == rank for s in r["steps"]}


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gloo-tp-sp")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tracekit",
            "run",
            "--workload",
            "tp-sp",
            "--tp",
            "2",
            "--layers",
            "1",
            "--seq",
            "64",
            "--hidden",
            "128",
            "--heads",
            "4",
            "--steps",
            "3",
            "--overlap",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="module")
def gpu_pair(tmp_path_factory) -> Path:
    """The NCCL trace as rank 0 and, relabelled, as rank 1 of a 2-rank run (the same times: a known pair)."""
    d = tmp_path_factory.mktemp("gpu-pair")
    raw = inflated(GPU)
    (d / "rank0.json").write_bytes(raw)
    (d / "rank1.json").write_bytes(raw.replace(b'"rank": 0, "world_size": 2', b'"rank": 1, "world_size": 2', 1))
    return d


def _assert_complete_steps_exact(intact: dict, cut: dict, rank: int) -> tuple[list, list]:
    whole, cut_steps = steps_of(intact, rank), steps_of(cut, rank)
    complete = [s for s, row in cut_steps.items() if row["complete"]]
    partial = [s for s, row in cut_steps.items() if not row["complete"]]
    for s in complete:
        assert cut_steps[s] == whole[s], s  # every figure, to the last bit
    for s in partial:
        assert cut_steps[s]["partial_reason"], s
    assert set(cut_steps) <= set(whole)
    return complete, partial


def _failing_budgets(intact: dict) -> list[str]:
    """Budgets the intact run fails: each run metric bounded just below (or above) the intact median."""
    from tracekit.gate import Summary

    s = Summary(intact)
    out = []
    for metric in ("exposed_comm_us", "comm_us", "wall_us", "compute_us", "exposed_comm_share"):
        stat = s.stat(metric)
        if stat is not None and stat.median > 0:
            out.append(f"{metric}<={stat.median * 0.5:.6g}")
    return out


def _check(path, *args) -> tuple[int, dict]:
    with tempfile.TemporaryDirectory() as out:  # never beside the traces: a directory run would load it
        verdict = Path(out) / "verdict.json"
        res = CliRunner().invoke(cli, ["check", str(path), *args, "--json", str(verdict)])
        assert res.exit_code in (0, 1), res.output
        return res.exit_code, json.loads(verdict.read_text())


def _worse_baseline(intact: dict, path: Path) -> Path:
    """The intact summary with steps half as long: the intact run regresses against it (--metric wall_us)."""
    b = copy.deepcopy(intact)
    for r in b["ranks"]:
        for row in r["steps"]:
            row["wall_us"] /= 2
    path.write_text(json.dumps(b))
    return path


def _sweep_single(tmp_path, src: str, rank: int) -> list[tuple]:
    intact = summary(src)
    rank = intact["ranks"][0]["rank"]
    assert all(row["complete"] for row in steps_of(intact, rank).values())
    budgets = [a for b in _failing_budgets(intact) for a in ("--budget", b)]
    base = _worse_baseline(intact, tmp_path / "baseline.json")
    code, _ = _check(src, *budgets)
    assert code == 1
    assert _check(src, "--baseline", str(base), "--metric", "wall_us")[0] == 1
    raw = inflated(src)
    figures = []
    for frac in CUTS:
        for gz in (True, False):
            cut = write_cut(raw, frac, tmp_path / f"cut{int(frac * 100)}.json{'.gz' if gz else ''}", gz)
            d = summary(cut)
            (r,) = d["ranks"]
            assert r["truncated"] and any("truncated" in w for w in d["warnings"])
            complete, partial = _assert_complete_steps_exact(intact, d, rank)
            assert partial, "the step the file was cut in is never complete"
            code, verdict = _check(cut, *budgets)
            assert code == 1 and not verdict["passed"], (frac, gz)
            assert any("truncated" in w for w in verdict["warnings"])
            assert _check(cut, "--baseline", str(base), "--metric", "wall_us")[0] == 1
            code, verdict = _check(cut, *budgets, "--allow-partial")  # the complete steps alone still fail
            assert code == 1 or not complete
            figures.append((frac, gz, complete, partial))
    return figures


@pytest.mark.parametrize(
    "name",
    ["allreduce-broadcast-2rank-rank0.json.gz", "pp-sendrecv-128rank-rank0.json.gz", "single-rank-nocomm-nsresolution.json.gz"],
)
def test_gpu_trace_cut_anywhere(tmp_path, name):
    """pp-sendrecv writes step 551's last kernels after step 552's: a rule by cut time would call 551 complete
    with half its communication; the ns-resolution trace loses its exact timestamps with the end of the file."""
    figures = _sweep_single(tmp_path, gpu_trace(name), 0)
    assert all(not complete for _, _, complete, _ in figures)  # a cut GPU trace holds no step for sure


def test_gloo_trace_cut_anywhere(tmp_path, gloo_run):
    """Kineto writes the host threads' blocks in an order that changes from run to run (the next test tries every
    order); here the main thread, which holds the steps and most of the bytes, is written last, after the gloo
    workers' spans, so every cut falls in it and keeps the steps before it whole, whatever order this run's trace
    happened to have. (Main thread first, only a cut past every worker span keeps a step: a cut in a worker's
    block leaves no step whose links can be trusted, and whether 99 % is past them depends on the run.)"""
    doc = json.loads(inflated(str(gloo_run / "rank0.trace.json.gz")))
    steps = {e.get("tid") for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
    doc["traceEvents"] = sorted(doc["traceEvents"], key=lambda e: e.get("ph") == "X" and e.get("tid") in steps)
    src = tmp_path / "main-thread-last.json.gz"
    src.write_bytes(gzip.compress(json.dumps(doc).encode()))
    figures = _sweep_single(tmp_path, str(src), 0)
    assert all(c for frac, _, c, _ in figures if frac >= 0.7)  # a cut well past the first step keeps it whole


def test_gloo_trace_cut_anywhere_whatever_order_the_threads_are_written_in(tmp_path, gloo_run):
    """Kineto writes each host thread's events as one block, in an order that changes from run to run (main
    thread first or last). A cut in one block loses the blocks after it whole: a gloo worker's spans, whose
    calls on the main thread survive (and the loader links spans to calls in issue order)."""
    src = gloo_run / "rank1.trace.json.gz"
    doc = json.loads(inflated(str(src)))
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    other = [e for e in doc["traceEvents"] if e.get("ph") != "X"]
    threads = list(dict.fromkeys(e.get("tid") for e in spans))
    assert len(threads) >= 3  # the main thread and two gloo workers
    intact = summary(src)
    seen_complete = 0
    for order in itertools.permutations(threads):
        doc["traceEvents"] = [e for t in order for e in spans if e.get("tid") == t] + other
        raw = json.dumps(doc, indent=1).encode()
        for frac in CUTS:
            cut = summary(write_cut(raw, frac, tmp_path / "cut.json", gz=False))
            complete, _ = _assert_complete_steps_exact(intact, cut, 1)
            seen_complete += len(complete)
    assert seen_complete  # the rules do not simply mark everything incomplete


@pytest.mark.parametrize("frac", CUTS)
def test_one_truncated_rank_of_a_gpu_pair_loses_its_clock_and_moves_nothing(tmp_path, gpu_pair, frac):
    intact = summary(gpu_pair)
    assert any(c["wait_us"] is not None for c in intact["collectives"])
    d = tmp_path / "pair"
    d.mkdir()
    shutil.copy(gpu_pair / "rank0.json", d)
    write_cut((gpu_pair / "rank1.json").read_bytes(), frac, d / "rank1.json.gz", gz=True)
    cut = summary(d)
    assert steps_of(cut, 0) == steps_of(intact, 0)  # the whole rank's own figures do not move
    _assert_complete_steps_exact(intact, cut, 1)
    assert any(w.startswith("rank 1: no usable clock") and "baseTimeNanoseconds" in w for w in cut["warnings"])
    assert [o["rank"] for o in cut["clock_offsets"]] == []  # no offset of -1.7e9 s
    assert all(c[k] is None for c in cut["collectives"] for k in CROSS[:3])
    assert cut["stragglers"] == []
    mine = [{k: v for k, v in c.items() if k not in CROSS} for c in cut["collectives"] if c["rank"] == 0]
    assert mine == [{k: v for k, v in c.items() if k not in CROSS} for c in intact["collectives"] if c["rank"] == 0]


@pytest.mark.parametrize("frac", (0.5, 0.9))
def test_one_truncated_rank_of_a_gloo_pair(tmp_path, gloo_run, frac):
    intact = summary(gloo_run)
    d = tmp_path / "pair"
    d.mkdir()
    shutil.copy(gloo_run / "rank0.trace.json.gz", d)
    shutil.copy(gloo_run / "run.json", d)
    write_cut(inflated(str(gloo_run / "rank1.trace.json.gz")), frac, d / "rank1.trace.json", gz=False)
    cut = summary(d)
    assert steps_of(cut, 0) == steps_of(intact, 0)
    _, partial = _assert_complete_steps_exact(intact, cut, 1)
    assert partial
    assert any(w.startswith("rank 1: truncated trace: the collectives it lost") for w in cut["warnings"])
    assert all(c[k] is None for c in cut["collectives"] for k in CROSS[:3])  # unknown, never shifted
    assert cut["clock_offsets"] == [] and intact["clock_offsets"] != []
    assert _check(d, "--budget", "overlap_ratio>=0")[0] == 1  # a truncated rank: the gate does not pass
