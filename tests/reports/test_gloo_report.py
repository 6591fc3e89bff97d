"""A real two-process gloo run (annotated collectives, rank 1 late in one step) through loader, analyzer and
the HTML report in headless Chromium: no console errors, every number in the DOM equals the summary, the
timeline bars are the analyzer's pieces, and on CPU the drawn step's compute + exposed = wall - idle."""

from __future__ import annotations

import pytest

from tests.helpers.net import free_port
from tests.helpers.report_page import ARTIFACTS, check_numbers, check_timeline, open_report
from tests.integration.test_cross_rank_gloo import _worker


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    import torch.multiprocessing as mp

    from tracekit.cli._analysis import analysis_from_traces

    out = tmp_path_factory.mktemp("gloo-report")
    mp.start_processes(_worker, args=(free_port(), str(out)), nprocs=2, start_method="spawn")
    return analysis_from_traces([str(out)], no_cache=True, executor="serial")


@pytest.mark.slow
def test_gloo_report_in_browser(browser, tmp_path, gloo_run):
    summary, timeline = gloo_run.to_dict(), gloo_run.timeline()
    assert summary["run"]["device_type"] == "cpu" and [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert summary["clock_offsets"] and summary["stragglers"] and summary["collectives"]
    _, page = open_report(browser, tmp_path, summary, "gloo", timeline=timeline)
    try:
        assert page.errors() == []
        assert all(u.startswith(("file:", "data:", "about:")) for u in page.requests())
        check_numbers(page, summary)
        keys = set(page.eval("Array.from(document.querySelectorAll('[data-key]')).map(e => e.dataset.key)"))
        assert {"clock_offsets.0.offset_us", "stragglers.0.total_caused_wait_us", "headline.exposed_share"} <= keys
        assert any(k.startswith("collectives.") and k.endswith(".wait_us") for k in keys)
        check_timeline(page, timeline)
        page.screenshot(ARTIFACTS / "report-gloo-2rank.png")
    finally:
        page.close()


@pytest.mark.slow
def test_gloo_timeline_agrees_with_the_step_figures(gloo_run):
    summary, timeline = gloo_run.to_dict(), gloo_run.timeline()
    assert len({r["step"] for r in timeline["ranks"]}) == 1  # the same step on both ranks
    for r in timeline["ranks"]:
        (step,) = [s for rk in summary["ranks"] if rk["rank"] == r["rank"] for s in rk["steps"] if s["step"] == r["step"]]
        t0, t1 = r["window_us"]
        assert t1 - t0 == pytest.approx(step["wall_us"], abs=1e-3)
        length = {c: sum(e - s for s, e, k in r["intervals"] if k == c) for c in ("compute", "hidden", "exposed")}
        assert all(t0 <= s <= e <= t1 for s, e, _ in r["intervals"])
        # no memcpy on CPU: busy time in the window = |K ∩ W| + |(C \ K) ∩ W|. The record's µs floats of
        # ~5e12 µs (gloo traces' monotonic ts) are spaced 2^-10 µs apart: allow that per interval
        tol = 1e-3 * len(r["intervals"])
        assert length["compute"] + length["exposed"] == pytest.approx(step["wall_us"] - step["idle_us"], abs=tol)
        assert length["hidden"] <= length["compute"] + 1e-6
        assert length["exposed"] > 0
