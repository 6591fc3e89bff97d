"""Each rank's detail beyond ``full_detail_ranks`` (tracekit/analyzers/rank_detail.py): a generated run of 20 ranks
analysed whole and with the limit at 8. The cut summary keeps each rank's longest kernels, longest launch delays
and fewest memory points, counts what it left out, stays under the stated size per rank, and every figure over a
rank or the run is the whole analysis's."""

from __future__ import annotations

import dataclasses
import json

import pytest

import tracekit
from tests.helpers.data import gpu_trace
from tests.helpers.multirank import generate
from tests.helpers.rank_layout import Layout
from tracekit.analyzers import analyze
from tracekit.analyzers.files import analyze_files
from tracekit.analyzers.rank_detail import KERNELS_PER_RANK, MEMORY_POINTS_PER_RANK, OUTLIERS_PER_RANK, bytes_per_rank
from tracekit.cli.output import text
from tracekit.formats.summary import decode_summary
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.traceset import TraceSet

LIMIT = "8"
OPTIONS = LoadOptions(cache=False)
KW = {"runtime_cutoff_ns": 5_000}  # runtime calls over 5 µs are outliers: more than OUTLIERS_PER_RANK a rank


@pytest.fixture(scope="module")
def run20(tmp_path_factory):
    """20 ranks (tp 2 × pp 2 × dp 5) of one real step each, a straggler, host clock offsets."""
    out = tmp_path_factory.mktemp("run20")
    generate(str(out), Layout(2, 2, 5), gpus_per_node=4, workers=1)
    return str(out)


@pytest.fixture(scope="module")
def whole(run20):
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TRACEKIT_FULL_DETAIL_RANKS", raising=False)
        return analyze_files([run20], options=OPTIONS, executor="serial", progress=False, **KW).to_dict()


@pytest.fixture(scope="module")
def cut(run20):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEKIT_FULL_DETAIL_RANKS", LIMIT)
        return analyze_files([run20], options=OPTIONS, executor="serial", progress=False, **KW).to_dict()


def test_up_to_the_limit_nothing_is_cut(whole):
    assert "rank_detail" not in whole
    assert max(len(r["kernel_breakdown"]) for r in whole["ranks"]) > KERNELS_PER_RANK  # a cut would change it
    assert max(len(r["launch_stats"]["outliers"]) for r in whole["ranks"]) > OUTLIERS_PER_RANK


def test_each_rank_keeps_its_longest_rows_and_the_rest_are_counted(whole, cut):
    kernels_left = outliers_left = 0
    for w, c in zip(whole["ranks"], cut["ranks"], strict=True):
        assert w["rank"] == c["rank"]
        by_total = sorted(w["kernel_breakdown"], key=lambda k: -k["total_us"])
        assert c["kernel_breakdown"] == by_total[:KERNELS_PER_RANK]
        assert c["launch_stats"]["outliers"] == w["launch_stats"]["outliers"][:OUTLIERS_PER_RANK]
        kernels_left += len(w["kernel_breakdown"]) - len(c["kernel_breakdown"])
        outliers_left += len(w["launch_stats"]["outliers"]) - len(c["launch_stats"]["outliers"])
    assert kernels_left > 0 and outliers_left > 0
    assert cut["rank_detail"] == {
        "ranks": 20,
        "full_detail_ranks": 8,
        "kernels_per_rank": KERNELS_PER_RANK,
        "outliers_per_rank": OUTLIERS_PER_RANK,
        "memory_points_per_device": MEMORY_POINTS_PER_RANK,
        "kernel_rows_omitted": kernels_left,
        "outlier_rows_omitted": outliers_left,
    }
    (said,) = [w for w in cut["warnings"] if "rank_detail" in w]
    assert f"{kernels_left} kernel rows and {outliers_left} outlier rows left out" in said
    assert decode_summary(json.dumps(cut).encode()).rank_detail.kernel_rows_omitted == kernels_left


def test_figures_over_a_rank_or_the_run_are_the_whole_analysis(whole, cut):
    """Only the rows go: totals, steps, kernel classes, the busy partition, idle causes, launch percentiles and
    counts, and everything cross-rank are computed before the cut."""
    for w, c in zip(whole["ranks"], cut["ranks"], strict=True):
        for key in w.keys() - {"kernel_breakdown", "launch_stats"}:
            assert c[key] == w[key], (w["rank"], key)
        assert {k: v for k, v in c["launch_stats"].items() if k != "outliers"} == {
            k: v for k, v in w["launch_stats"].items() if k != "outliers"
        }
    for key in whole.keys() - {"ranks", "warnings"}:
        assert cut[key] == whole[key], key


def test_the_summary_stays_under_its_size_per_rank(whole, cut):
    """As `analyze --format json` writes it (indent 2), without the collectives (bounded over the whole run)."""

    def per_rank(doc: dict) -> float:
        rest = {k: v for k, v in doc.items() if k != "collectives"}
        return len(text(rest, "json", indent=2)) / len(doc["ranks"])

    steps = max(len(r["steps"]) for r in cut["ranks"])
    assert per_rank(cut) < bytes_per_rank(steps) < per_rank(whole)


def test_the_plain_path_cuts_alike(run20):
    """analyze(load(...)) cuts the RankBreakdowns where the summary is built, analyze_files where each rank loads."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEKIT_FULL_DETAIL_RANKS", LIMIT)
        plain = analyze(load([run20], options=OPTIONS, executor="serial", progress=False), **KW).to_dict()
        mapped = analyze_files([run20], options=OPTIONS, executor="serial", progress=False, **KW).to_dict()
    assert "rank_detail" in plain and plain == mapped


def test_memory_points_per_device_beyond_the_limit(monkeypatch):
    """A real trace with [memory] events as two ranks, the limit at one: at most MEMORY_POINTS_PER_RANK points per
    device, the peaks (computed over every event) as with the whole 1,000."""
    one = load(gpu_trace("ddp-allreduce-2rank-rank1-oldformat.json.gz"), options=OPTIONS, progress=False)
    (r,) = one.ranks
    info = one.info(r)
    two = TraceSet({0: one.table(r), 1: one.table(r)}, {0: dataclasses.replace(info, rank=0), 1: info}, one.metadata)
    full = tracekit.analyze(two).memory[1].to_dict()
    monkeypatch.setenv("TRACEKIT_FULL_DETAIL_RANKS", "1")
    few = tracekit.analyze(two).memory[1].to_dict()
    assert few["max_points"] == MEMORY_POINTS_PER_RANK and full["max_points"] == 1000
    assert all(len(p["t_us"]) <= MEMORY_POINTS_PER_RANK for p in few["points"])
    assert sum(len(p["t_us"]) for p in full["points"]) > sum(len(p["t_us"]) for p in few["points"])
    assert few["devices"] == full["devices"] and few["points_total"] == full["points_total"]
