"""The report's view model and HTML source: figures against sums computed here, escaping, downsampling."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.report_fixtures import TEMPLATE_KERNEL, XSS_IMG, XSS_SCRIPT, make_summary, make_timeline
from tracekit.errors import ConfigError
from tracekit.reports import get_reporter
from tracekit.reports.html import json_for_script
from tracekit.reports.timeline_drawing import _merge, merge_gap, prepare
from tracekit.reports.view import headline


def test_headline_pools_rank_totals():
    s = make_summary(n_ranks=3, n_steps=2)
    walls = [st["wall_us"] for r in s["ranks"] for st in r["steps"]]
    exposed = sum(st["exposed_comm_us"] for r in s["ranks"] for st in r["steps"])
    hidden = sum(st["hidden_comm_us"] for r in s["ranks"] for st in r["steps"])
    comm = sum(st["comm_us"] for r in s["ranks"] for st in r["steps"])
    got = {f.key: f.value for f in headline(s)}
    assert got["headline.step_us"] == pytest.approx(sum(walls) / 6)
    assert got["headline.exposed_share"] == pytest.approx(exposed / sum(walls))
    assert got["headline.overlap_ratio"] == pytest.approx(hidden / comm)


def test_json_blob_cannot_close_its_script():
    text = json_for_script({"n": "</script><!-- <img src=x onerror=alert(1)> & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"n": "</script><!-- <img src=x onerror=alert(1)> & \u2028"}


def test_html_source_escapes_trace_strings(tmp_path):
    out = get_reporter("html").render(make_summary(n_ranks=2), tmp_path / "r.html").path
    html = out.read_text()
    body = html.split('<script type="application/json"', 1)[0]
    for raw in (XSS_SCRIPT, XSS_IMG, TEMPLATE_KERNEL, "<b>bold</b>"):
        assert raw not in html
    assert "&lt;script&gt;document.title=" in body
    assert "&lt;img src=x onerror=" in body
    assert "elementwise_kernel&lt;128, 2," in body
    # only our own script elements: the blob, plotly, the page script, the breakdowns' blob and chart script (and
    # none from the data)
    assert len(re.findall(r"<script\b", html)) == 5
    assert "https://" not in body and "cdn" not in body.lower()


def test_reporter_by_suffix_and_bad_schema(tmp_path):
    assert get_reporter(out="x.json").format == "json"
    with pytest.raises(ConfigError):
        get_reporter("html").render({"schema": "other/9"}, tmp_path / "r.html")
    with pytest.raises(ConfigError):
        get_reporter("pdf")


def test_timeline_from_analyzer_is_relative_to_window():
    tl = prepare(make_summary(), make_timeline(n_ranks=2, pieces=3))
    assert tl.source == "analyzer" and not tl.downsampled and tl.total == 18
    r1 = tl.ranks[1]["intervals"]
    assert r1["compute"] == [[0.0, 300.0], [500.0, 800.0], [1000.0, 1300.0]]
    assert r1["exposed"][0] == [300.0, 450.0]


def test_timeline_downsampling_bounds_and_covers():
    tl = prepare(make_summary(), make_timeline(n_ranks=4, pieces=50), max_events=40)
    assert tl.downsampled and tl.shown <= 40 and tl.total == 600
    for r in tl.ranks:  # merged compute still spans the first start to the last end
        assert r["intervals"]["compute"][0][0] == 0.0 and r["intervals"]["compute"][-1][1] == 49 * 500.0 + 300.0


def test_timeline_fallback_from_collectives():
    s = make_summary(n_ranks=2, n_steps=3)
    tl = prepare(s, None)
    assert tl.source == "collectives"
    step = tl.ranks[0]["step"]
    n = sum(1 for c in s["collectives"] if c["rank"] == 0 and c["step"] == step)
    assert sum(len(v) for v in tl.ranks[0]["intervals"].values()) == n


def test_bad_timeline_is_rejected():
    tl = make_timeline(n_ranks=1, pieces=1)
    tl["ranks"][0]["intervals"].append([5.0, 1.0, "exposed"])
    with pytest.raises(ConfigError):
        prepare(make_summary(), tl)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.floats(0, 1e4), st.floats(0, 50)), min_size=1, max_size=30), min_size=1, max_size=5),
    st.integers(1, 80),
)
def test_merge_gap_oracle(raw, max_events):
    """Brute force: the count after merging with the chosen gap fits, and every input lies inside an output."""
    series = []
    for ivs in raw:
        a = np.array(sorted((s, s + d) for s, d in ivs))
        series.append(a)
    gap = merge_gap(series, max_events)
    merged = [_merge(a, gap) for a in series]
    if sum(len(a) for a in series) > max_events:
        assert sum(len(m) for m in merged) <= max(max_events, len(series))
    else:
        assert gap is None
    for a, m in zip(series, merged):
        for s, e in a:
            assert any(ms <= s and e <= me for ms, me in m)
