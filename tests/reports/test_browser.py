"""Reports opened in headless Chromium: no console errors, no network, the numbers shown equal the summary,
hostile kernel names shown as text and never run. Screenshots go to artifacts/ (git-ignored)."""

from __future__ import annotations

from tests.helpers.report_fixtures import BOLD_NAME, TEMPLATE_KERNEL, XSS_IMG, XSS_SCRIPT, make_summary, make_timeline
from tests.helpers.report_page import ARTIFACTS, check_numbers, check_timeline, open_report
from tracekit.analyzers.names import short_name


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
        titles = page.eval("Array.from(document.querySelectorAll('td[title]')).map(t => t.title)")
        for raw in (XSS_SCRIPT, XSS_IMG, TEMPLATE_KERNEL, BOLD_NAME):  # short in the cell, whole in its tooltip
            assert short_name(raw) in text and raw in titles
        assert page.eval("document.querySelectorAll('main script, main img, main b').length") == 0
        # plotly labels of the top-collectives chart carry the names as text too
        svg = page.eval("Array.from(document.querySelectorAll('#chart-top text')).map(t => t.textContent).join('\\n')")
        assert "<img src=x onerror=" in svg and short_name(TEMPLATE_KERNEL) in svg and BOLD_NAME in svg
        n = check_numbers(page, summary)
        assert n > 100
        page.screenshot(ARTIFACTS / "report-hostile.png")
    finally:
        page.close()


def test_64_rank_report_is_small_and_says_it_downsampled(browser, tmp_path):
    summary = make_summary(n_ranks=64, n_steps=4, per_step=8, hostile=False)
    out, page = open_report(
        browser, tmp_path, summary, "r64", timeline=make_timeline(n_ranks=64, pieces=200), max_timeline_events=5000
    )
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
    from tests.helpers.data import real_trace
    from tracekit.cli._analysis import analysis_from_traces

    result = analysis_from_traces([str(real_trace("allreduce-broadcast-2rank-rank0"))], no_cache=True, executor="serial")
    summary, timeline = result.to_dict(), result.timeline()
    _, page = open_report(browser, tmp_path, summary, "real", timeline=timeline)
    try:
        assert page.errors() == []
        check_numbers(page, summary)
        check_timeline(page, timeline)
        page.screenshot(ARTIFACTS / "report-real-allreduce.png")
    finally:
        page.close()
