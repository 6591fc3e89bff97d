"""Reports opened in headless Chromium: no console errors, no network, the numbers shown equal the summary,
hostile kernel names shown as text and never run. Screenshots go to artifacts/ (git-ignored)."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

from tests.helpers.browser import Browser
from tests.helpers.report_fixtures import BOLD_NAME, TEMPLATE_KERNEL, XSS_IMG, XSS_SCRIPT, make_summary, make_timeline
from tracekit.reports import get_reporter

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

# Every displayed number, read back from the DOM.
SHOWN = """JSON.stringify(Array.from(document.querySelectorAll('[data-key]')).map(
  e => [e.dataset.key, e.dataset.value, e.textContent]))"""


@pytest.fixture(scope="module")
def browser():
    try:
        b = Browser()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield b
    b.close()


def summary_value(summary: dict, key: str):
    """The value a data-key names, found by walking the summary (headline figures computed here instead)."""
    if key.startswith("headline."):
        ranks = summary["ranks"]
        n = sum(len(r["steps"]) for r in ranks)
        tot = lambda k: sum(st[k] for r in ranks for st in r["steps"])
        return {"step_us": tot("wall_us") / n, "exposed_share": tot("exposed_comm_us") / tot("wall_us"),
                "overlap_ratio": tot("hidden_comm_us") / tot("comm_us"), "comm_us": tot("comm_us") / n}[key[9:]]
    return functools.reduce(lambda d, k: d[int(k)] if isinstance(d, list) else d[k], key.split("."), summary)


def check_numbers(page, summary: dict) -> int:
    import json
    shown = json.loads(page.eval(SHOWN))
    assert shown, "no numbers on the page"
    for key, value, text in shown:
        want = summary_value(summary, key)
        if want is None:
            assert value == "null" and text == "—", key
        else:
            assert math.isclose(float(value), want, rel_tol=1e-9, abs_tol=1e-9), (key, value, want)
            assert text.strip() and text != "—", key
    return len(shown)


def check_timeline(page, timeline: dict) -> None:
    """The bars plotly drew (its data on the chart's div) add up, per rank and category, to the record's pieces."""
    import json
    drawn = json.loads(page.eval("""JSON.stringify(document.getElementById('chart-timeline').data.map(
      t => [t.name, t.y, t.x]))"""))
    names = {"compute": "compute", "hidden": "hidden comm", "exposed": "exposed comm"}
    for r in timeline["ranks"]:
        for cat, name in names.items():
            want = sum(e - s for s, e, c in r["intervals"] if c == cat)
            (trace,) = [t for t in drawn if t[0] == name]
            lane = f"r{r['rank']} compute" if cat == "compute" else f"r{r['rank']} comm"
            got = sum(x for y, x in zip(trace[1], trace[2]) if y == lane)
            assert got == pytest.approx(want, abs=1e-3 * (1 + len(r["intervals"]))), (r["rank"], cat)
    assert sum(len(t[2]) for t in drawn) == sum(len(r["intervals"]) for r in timeline["ranks"])


def open_report(browser, tmp_path, summary, name, **opts):
    out = get_reporter("html").render(summary, tmp_path / f"{name}.html", **opts)
    page = browser.load(out.path)
    return out, page


def test_hostile_names_show_as_text_and_numbers_match(browser, tmp_path):
    summary = make_summary(n_ranks=2, n_steps=3, per_step=4)
    _, page = open_report(browser, tmp_path, summary, "hostile", timeline=make_timeline(n_ranks=2))
    try:
        assert page.eval("document.body.dataset.rendered") == "1"
        assert page.errors() == []
        assert all(u.startswith(("file:", "data:", "about:")) for u in page.requests()), page.requests()
        assert page.eval("window.__tk_pwned === undefined") is True
        assert page.eval("document.title") == "tracekit report — tp-sp <b>bold</b> (2 ranks)"
        text = page.eval("document.body.innerText")
        for raw in (XSS_SCRIPT, XSS_IMG, TEMPLATE_KERNEL, BOLD_NAME):
            assert raw in text
        assert page.eval("document.querySelectorAll('main script, main img, main b').length") == 0
        # plotly labels of the top-collectives chart carry the names as text too
        svg = page.eval("Array.from(document.querySelectorAll('#chart-top text')).map(t => t.textContent).join('\\n')")
        assert "<img src=x onerror=" in svg and "elementwise_kernel<128, 2," in svg and BOLD_NAME in svg
        n = check_numbers(page, summary)
        assert n > 100
        page.screenshot(ARTIFACTS / "report-hostile.png")
    finally:
        page.close()


def test_64_rank_report_is_small_and_says_it_downsampled(browser, tmp_path):
    summary = make_summary(n_ranks=64, n_steps=4, per_step=8, hostile=False)
    out, page = open_report(browser, tmp_path, summary, "r64", timeline=make_timeline(n_ranks=64, pieces=200),
                            max_timeline_events=5000)
    try:
        assert out.size_bytes < 6 * 2**20
        assert any("--max-timeline-events" in n for n in out.notes)
        assert page.errors() == []
        assert "--max-timeline-events" in page.eval("document.getElementById('downsampled').innerText")
        assert page.eval("document.querySelectorAll('#chart-heatmap .hm, #chart-heatmap image').length") >= 1
        check_numbers(page, summary)
        page.screenshot(ARTIFACTS / "report-64rank.png")
    finally:
        page.close()


def test_report_from_real_trace_in_browser(browser, tmp_path):
    """A real GPU trace through loader + analyzer, checked in the browser with the analyzer's timeline."""
    from tracekit.cli._analysis import analysis_from_traces

    from .test_cli import real_trace

    result = analysis_from_traces([str(real_trace("allreduce-broadcast-2rank-rank0"))], no_cache=True,
                                  executor="serial")
    summary, timeline = result.to_dict(), result.timeline()
    _, page = open_report(browser, tmp_path, summary, "real", timeline=timeline)
    try:
        assert page.errors() == []
        check_numbers(page, summary)
        check_timeline(page, timeline)
        page.screenshot(ARTIFACTS / "report-real-allreduce.png")
    finally:
        page.close()
