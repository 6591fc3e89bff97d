"""`tracekit demo` (what `make demo` runs): a real 4-process TP+SP × CP run on CPU -> traces -> analysis ->
summary JSON and HTML report, with every parallel dimension attributed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_end_to_end(tmp_path):
    out = tmp_path / "demo"
    r = subprocess.run(
        [sys.executable, "-m", "tracekit", "demo", "--out", str(out), "--steps", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # no stray lines: Kineto's USDT/STAGE chatter stays out, stderr holds only tracekit's notes, the tables fit
    assert not [x for x in (r.stdout + r.stderr).splitlines() if x.startswith(("USDT:", "STAGE:"))]
    assert all(x.startswith("tracekit: note: ") for x in r.stderr.splitlines()), r.stderr
    assert max(len(x) for x in r.stdout.splitlines() if x[:1] in "┏┃┡│└") <= 100  # paths may be longer
    summary = json.loads((out / "summary.json").read_text())
    assert [x["rank"] for x in summary["ranks"]] == [0, 1, 2, 3]
    assert all(len(x["steps"]) == 2 for x in summary["ranks"])
    dims = {(d["dimension"], d["op"]) for d in summary["by_dimension"]}
    # TP+SP conjugates on the tp group, the ring exchange on cp, gradient sync over dp×cp
    assert {("sp", "all_gather"), ("sp", "reduce_scatter"), ("cp", "send_recv"), ("dp", "all_reduce")} <= dims
    assert "unknown" not in {d for d, _ in dims}
    # every collective matched across its group's ranks: wait and transfer are known
    assert all(c["wait_us"] is not None for c in summary["collectives"])
    html = (out / "report.html").read_text()
    assert "tracekit.summary/1" in html and '<script src="http' not in html
    assert f"report:  {out / 'report.html'}" in r.stdout
    assert not (out / "traces" / ".tracekit_cache").exists()  # the cache is in the user's cache directory
    _check_in_the_browser(out / "report.html", summary)


def _check_in_the_browser(path: Path, summary: dict) -> None:
    """The demo's report as Chromium renders it: nothing empty, no overlapping labels, one unit per column, no
    0 B or 0.00 for an unknown, the dp × cp group explained."""
    import re

    from tests.helpers.browser import Browser
    from tests.helpers.report_layout import empty_things, overlaps
    from tests.helpers.report_page import ARTIFACTS, check_numbers
    from tests.reports.test_report_page import check_units

    b = Browser()
    try:
        page = b.load(path, width=1280)
        assert page.errors() == []
        assert empty_things(page) == [] and overlaps(page) == []
        check_units(page)
        check_numbers(page, summary)
        assert not re.search(r"(?<![\d.])0 B\b|\b0\.00 GB/s", page.eval("document.querySelector('main').innerText"))
        assert "dp × cp = 1 × 2 = 2 ranks" in page.eval("document.querySelector('.dimension-note').textContent")
        assert "gloo has no reduce-scatter" in page.eval("document.querySelector('.collective-note').textContent")
        page.screenshot(ARTIFACTS / "report-demo.png")
        page.close()
    finally:
        b.close()
