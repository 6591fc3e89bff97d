"""The HTML report's papercuts (issue 32), each checked on the page as headless Chromium renders it: one unit per
column, — for every unknown, a section without data as one line that says why, warnings grouped, titles that say
what was loaded, a legend for every colour of the timeline, no overlapping chart labels at 1,280 and 1,920 px
(screenshots in artifacts/), the demo's dp group and gloo's reduce-scatter explained, the lean bundle and
``--plotly cdn``."""

from __future__ import annotations

import copy
import re

import pytest

from tests.helpers.report_fixtures import make_summary, make_timeline
from tests.helpers.report_layout import cell_texts, colours, empty_things, overlaps, resize
from tests.helpers.report_page import ARTIFACTS, check_numbers, open_report

# header unit -> value units per shown unit, for the summary field's kind (from the key's last part)
SCALES = {
    "us": {"µs": 1.0, "ms": 1e3, "s": 1e6},
    "bytes": {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30},
    "ratio": {"%": 0.01},
    "gbps": {"GB/s": 1.0},
}


def _kind(field: str) -> str | None:
    if field.endswith("_us") or field == "us":
        return "us"
    if field.endswith("bytes"):
        return "bytes"
    if field.endswith(("ratio", "share")):
        return "ratio"
    if field.endswith("gbps"):
        return "gbps"
    return None


def check_units(page) -> int:
    """Every numeric cell of every table: a bare number in the unit its column header names, equal to the summary
    value the cell carries to the column's precision; — where the cell says the value is unknown."""
    cells = cell_texts(page)
    for head, text, value, key, unknown in cells:
        if unknown:
            assert text == "—", (key, text)
            continue
        if value == "null":
            assert text == "—", key
            continue
        kind = _kind(key.rsplit(".", 1)[-1])
        if kind is None:  # a count
            assert re.fullmatch(r"-?\d+", text), (key, text)
            continue
        unit = head.rsplit(" ", 1)[-1]
        assert unit in SCALES[kind], (key, head)
        assert re.fullmatch(r"-?\d+(\.\d+)?|<0\.0*1", text), (key, text)  # no unit inside the cell
        if text.startswith("<"):
            assert 0 < float(value) / SCALES[kind][unit] < float(text[1:]), (key, text, value)
            continue
        decimals = len(text.split(".")[1]) if "." in text else 0
        assert float(text) == pytest.approx(float(value) / SCALES[kind][unit], abs=0.51 * 10**-decimals), (key, text, value)
    return len(cells)


def _gpu_like_one_rank_of(world: int) -> dict:
    s = make_summary(n_ranks=1, n_steps=3, per_step=4, hostile=False)
    s["run"]["world_size"] = world
    s["run"]["backend"], s["run"]["device_type"] = "nccl", "cuda"
    s["stragglers"], s["clock_offsets"] = (
        [],
        [{"rank": 0, "offset_us": 0.0, "spread_us": 0.0, "matched": 0, "method": "reference"}],
    )
    for c in s["collectives"][:3]:  # sizes the trace did not record
        c["bytes"], c["busbw_gbps"], c["algbw_gbps"] = 0, 0.0, 0.0
    for c in s["collectives"][3:5]:
        c["busbw_gbps"] = None
    s["by_dimension"][0]["bytes"], s["by_dimension"][0]["busbw_gbps"] = 0, None
    s["warnings"] = [f"rank {r}: the trace names no process groups (distributedInfo without pg_config)" for r in range(8)]
    return s


def test_columns_name_one_unit_and_unknowns_read_dash(browser, tmp_path):
    summary = _gpu_like_one_rank_of(64)
    _, page = open_report(browser, tmp_path, summary, "units", timeline=make_timeline(n_ranks=1))
    try:
        assert page.errors() == []
        assert check_units(page) > 50
        check_numbers(page, summary)
        heads = page.eval("Array.from(document.querySelectorAll('main th')).map(t => t.textContent)")
        assert not [h for h in heads if re.search(r"_us|_bytes|_gbps|_ratio", h)], heads  # labels, not field names
        assert "wall ms" in heads and "bytes KiB" in heads
        text = page.eval("document.querySelector('main').innerText")
        assert not re.search(r"(?<![\d.])0 B\b|\b0\.00 GB/s", text)
        unknown = page.eval("Array.from(document.querySelectorAll('[data-unknown]')).map(e => e.dataset.key)")
        assert {"collectives.0.bytes", "collectives.0.busbw_gbps", "by_dimension.0.bytes"} <= set(unknown)
    finally:
        page.close()


def test_one_rank_of_a_large_run_collapses_what_needs_peers(browser, tmp_path):
    summary = _gpu_like_one_rank_of(64)
    _, page = open_report(browser, tmp_path, summary, "one-rank", timeline=make_timeline(n_ranks=1))
    try:
        assert page.errors() == []
        assert page.eval("document.title") == "tracekit report — tp-sp <b>bold</b> (rank 0 of a 64-rank run)"
        assert "rank 0 of a 64-rank run" in page.eval("document.querySelector('header .sub').textContent")
        assert page.eval("document.querySelector('[data-overview=\"ranks loaded\"]').textContent") == "1 of 64 (rank 0)"
        assert empty_things(page) == []
        why = dict(
            page.eval("Array.from(document.querySelectorAll('[data-collapsed]')).map(e => [e.dataset.collapsed, e.textContent])")
        )
        assert set(why) == {"stragglers", "heatmap", "breakdowns"}, why  # this summary has no breakdowns: said once
        assert "load two or more" in why["stragglers"] and "one rank" in why["heatmap"].lower()
        assert page.eval("document.querySelectorAll('#stragglers .chart, #stragglers table, #heatmap .chart').length") == 0
        assert page.eval("document.querySelectorAll('#steps tbody tr').length") == 3  # the per-step figures instead
        warnings = page.eval("Array.from(document.querySelectorAll('li.warning')).map(e => e.textContent)")
        assert len(warnings) == 1 and "(×8: ranks 0–7 (8))" in warnings[0], warnings
        page.screenshot(ARTIFACTS / "report-one-rank-of-64.png")
    finally:
        page.close()


@pytest.mark.parametrize("width", [1280, 1920])
def test_labels_never_overlap_and_every_colour_has_a_legend(browser, tmp_path, width):
    summary = make_summary(n_ranks=8, n_steps=4, per_step=6, hostile=False)
    summary["run"]["manifest"] = {
        "profiler_overhead": {
            "profiled_step_ns": 425_000_000,
            "unprofiled_step_ns": 220_000_000,
            "profiled_steps": 3,
            "unprofiled_steps": 4,
            "rank": 0,
        }
    }
    _, page = open_report(browser, tmp_path, summary, f"layout-{width}", timeline=make_timeline(n_ranks=8, pieces=40))
    try:
        resize(page, width)
        assert page.errors() == []
        assert overlaps(page) == []
        assert empty_things(page) == []
        c = colours(page, "chart-timeline")
        assert c["fills"] and set(c["fills"]) <= set(c["legend"]) and c["strokes"] == [], c
        over = page.eval("document.querySelector('[data-overview=\"profiler overhead\"]').textContent")
        assert over.startswith("+93.2% per recorded step") and "425.000 ms profiled" in over
        page.screenshot(ARTIFACTS / f"report-layout-{width}.png")
    finally:
        page.close()


@pytest.mark.parametrize("width", [1280, 1920])
def test_real_gpu_trace_report_with_its_critical_path(browser, tmp_path, width):
    """A real GPU trace (one rank of a 128-rank job) with --critical-path: the lane's colours each in the legend,
    no outline read as black, no overlap, nothing empty, no unit mismatch, no 0 B for an unknown size."""
    from tests.helpers.data import real_trace
    from tracekit.cli._analysis import analysis_from_traces

    a = analysis_from_traces([str(real_trace("pp-sendrecv-128rank-rank0"))], no_cache=True, executor="serial", critical_path=True)
    summary, timeline = a.to_dict(), a.timeline()
    _, page = open_report(browser, tmp_path, summary, f"real-{width}", timeline=timeline)
    try:
        resize(page, width)
        assert page.errors() == [] and page.eval("document.body.dataset.criticalRendered") not in (None, "none")
        assert overlaps(page) == [] and empty_things(page) == []
        c = colours(page, "chart-timeline")
        assert set(c["fills"]) <= set(c["legend"]) and c["strokes"] == [], c
        check_units(page)
        check_numbers(page, summary)
        assert "rank 0 of a 128-rank run" in page.eval("document.title")
        assert not re.search(r"(?<![\d.])0 B\b|\b0\.00 GB/s", page.eval("document.querySelector('main').innerText"))
        page.screenshot(ARTIFACTS / f"report-real-pp-{width}.png")
    finally:
        page.close()


def test_the_demo_layout_dp_group_and_gloo_reduce_scatter_are_explained(browser, tmp_path):
    summary = make_summary(n_ranks=4, n_steps=2, per_step=4, hostile=False)
    summary["run"]["layout"] = {"tp": 2, "cp": 2, "dp": 1, "sequence_parallel": True, "cp_kind": "ring"}
    for c in summary["collectives"]:
        if c["op"] == "reduce_scatter":
            c["name"] = "gloo:all_reduce"
    _, page = open_report(browser, tmp_path, summary, "explained", timeline=make_timeline(n_ranks=4))
    try:
        dim = page.eval("document.querySelector('.dimension-note').textContent")
        assert "dp × cp = 1 × 2 = 2 ranks" in dim and "layout says dp=1" in dim
        coll = page.eval("document.querySelector('.collective-note').textContent")
        assert "gloo has no reduce-scatter" in coll and "gloo:all_reduce" in coll
        assert (
            page.eval("document.querySelector('[data-overview=layout]').textContent")
            == "tp=2 × cp=2 (ring) × dp=1, sequence parallel"
        )
    finally:
        page.close()
    plain = copy.deepcopy(summary)
    plain["run"]["layout"] = {"tp": 2, "dp": 2}
    for c in plain["collectives"]:
        c["name"] = f"gloo:{c['op']}"
    _, page = open_report(browser, tmp_path, plain, "plain")
    try:  # neither note where it would not be true
        assert page.eval("document.querySelectorAll('.dimension-note, .collective-note').length") == 0
    finally:
        page.close()


def test_the_bundle_is_lean_and_cdn_mode_is_tiny(browser, tmp_path):
    summary = make_summary(n_ranks=4, n_steps=3, per_step=4, hostile=False)
    inline, page = open_report(browser, tmp_path, summary, "inline", timeline=make_timeline(n_ranks=4))
    try:
        assert inline.size_bytes < 2 * 2**20  # the full plotly bundle alone was 4.6 MiB
        assert page.errors() == [] and all(u.startswith(("file:", "data:", "about:")) for u in page.requests())
        assert page.eval("document.querySelectorAll('.chart .main-svg').length") >= 4
    finally:
        page.close()
    cdn, page = open_report(browser, tmp_path, summary, "cdn", timeline=make_timeline(n_ranks=4), plotly="cdn")
    try:
        assert cdn.size_bytes < 200_000
        html = cdn.path.read_text() if hasattr(cdn.path, "read_text") else open(cdn.path).read()
        assert '<script src="https://cdn.plot.ly/plotly-cartesian-4.1.1.min.js"' in html and "https://cdn.plot.ly" in html
        assert any(u.startswith("https://cdn.plot.ly/") for u in page.requests())  # tried, and the sandbox has no network
        assert page.eval("document.body.dataset.rendered") == "1"
        assert [e for e in page.errors() if "cdn.plot.ly" not in e and "ERR_" not in e] == []  # only the load failed
        assert page.eval("document.querySelectorAll('.chart.no-plotly').length") >= 4
        check_numbers(page, summary)  # the tables need no network
    finally:
        page.close()


def test_the_steps_table_stands_in_for_a_collapsed_heat_map_and_stays_short():
    from tracekit.reports import html_steps

    many = html_steps.context(make_summary(n_ranks=1, n_steps=100, per_step=1, hostile=False))
    assert len(many["table"].rows) == html_steps.MAX_ROWS and "64 of 100 steps shown" in many["note"]
    assert html_steps.context(make_summary(n_ranks=4, n_steps=3, per_step=1, hostile=False))["table"] is None  # the map has them
