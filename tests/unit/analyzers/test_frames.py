"""Each DataFrame accessor of tracekit.analyze's result against the rows of the JSON summary that
`tracekit analyze --format json` writes for the same traces, re-read from its output (same columns, same values)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from click.testing import CliRunner

import tracekit
from tests.helpers.data import gpu_trace
from tracekit.cli import cli

PAIR = [gpu_trace("pp-sendrecv-128rank-rank0.json.gz"), gpu_trace("pp-sendrecv-128rank-rank1.json.gz")]
MEMORY = [gpu_trace("ddp-allreduce-2rank-rank1-oldformat.json.gz")]


def _json(paths) -> dict:
    r = CliRunner().invoke(cli, ["analyze", *paths, "--format", "json", "--no-cache"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.fixture(scope="module", params=["pair", "memory"])
def both(request):
    paths = PAIR if request.param == "pair" else MEMORY
    return tracekit.analyze(tracekit.load(paths)), _json(paths)


def _same(df: pd.DataFrame, rows: list[dict]) -> None:
    assert len(df) == len(rows)
    if not rows:
        return
    assert list(df.columns) == list(rows[0]), (list(df.columns), list(rows[0]))
    for got, want in zip(df.to_dict("records"), rows):
        for k, v in want.items():
            g = got[k]
            if v is None:
                assert g is None or (isinstance(g, float) and math.isnan(g)), k
            elif isinstance(v, float):
                assert g == pytest.approx(v, rel=1e-12, abs=1e-9), k
            else:
                assert g == v, k


def _ranked(doc: dict, pick) -> list[dict]:
    rows = []
    for r in doc["ranks"]:
        section = pick(r)
        if section is not None:
            rows.extend({"rank": r["rank"], **x} for x in section)
    return rows


def _available(section):
    return None if isinstance(section, dict) and section.get("available") is False else section


TOP_LEVEL = {
    "collectives_frame": "collectives",
    "dimensions_frame": "by_dimension",
    "process_groups_frame": "by_process_group",
    "stragglers_frame": "stragglers",
    "clock_offsets_frame": "clock_offsets",
}


@pytest.mark.parametrize("accessor", sorted(TOP_LEVEL))
def test_communication_tables(both, accessor):
    analysis, doc = both
    df = getattr(analysis, accessor)()
    _same(df, doc[TOP_LEVEL[accessor]])
    if not doc[TOP_LEVEL[accessor]]:
        assert len(df.columns) > 2  # an empty table still has the JSON's columns


PER_RANK = {
    "steps_frame": lambda r: r["steps"],
    "kernel_frame": lambda r: _available(r["kernel_breakdown"]),
    "busy_partition_frame": lambda r: (
        None
        if not _available(r["busy_partition"])
        else [{**p, "busy_us": r["busy_partition"]["busy_us"]} for p in r["busy_partition"]["parts"]]
    ),
    "idle_frame": lambda r: None if not _available(r["idle_breakdown"]) else r["idle_breakdown"]["steps"],
    "launch_outliers_frame": lambda r: None if not _available(r["launch_stats"]) else r["launch_stats"]["outliers"],
    "memory_devices_frame": lambda r: None if not _available(r["memory_timeline"]) else r["memory_timeline"]["devices"],
    "memory_peaks_frame": lambda r: None if not _available(r["memory_timeline"]) else r["memory_timeline"]["steps"],
    "memory_allocators_frame": lambda r: None if not _available(r["memory_timeline"]) else r["memory_timeline"]["top_allocators"],
    "memory_points_frame": lambda r: (
        None
        if not _available(r["memory_timeline"])
        else [
            {"device": p["device"], "t_us": t, "allocated_bytes": a, "reserved_bytes": b}
            for p in r["memory_timeline"]["points"]
            for t, a, b in zip(p["t_us"], p["allocated_bytes"], p["reserved_bytes"])
        ]
    ),
}


@pytest.mark.parametrize("accessor", sorted(PER_RANK))
def test_per_rank_tables(both, accessor):
    analysis, doc = both
    _same(getattr(analysis, accessor)(), _ranked(doc, PER_RANK[accessor]))


def test_by_class_stream_and_launch_figures(both):
    analysis, doc = both
    _same(analysis.kernel_frame("class"), _ranked(doc, lambda r: _available(r["kernel_classes"])))
    _same(
        analysis.idle_frame("stream"), _ranked(doc, lambda r: _available(r["idle_breakdown"]) and r["idle_breakdown"]["streams"])
    )
    want = [
        {"rank": r["rank"], **{k: v for k, v in r["launch_stats"].items() if not isinstance(v, (list, dict))}}
        for r in doc["ranks"]
        if _available(r["launch_stats"])
    ]
    _same(analysis.launch_stats_frame(), want)


def test_unavailable_sections_are_named_not_zero():
    analysis = tracekit.analyze(tracekit.load(PAIR))
    df = analysis.memory_peaks_frame()
    assert df.empty and list(df.columns)[:2] == ["rank", "step"]
    assert set(df.attrs["unavailable"]) == {0, 1} and "profile_memory" in df.attrs["unavailable"][0]
