"""Checks of an HTML report opened in headless Chromium (tests.helpers.browser): every number shown equals the
summary, the timeline bars add up to the record's pieces. Screenshots go to artifacts/ (git-ignored)."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

from tracekit.reports import get_reporter

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

# Every displayed number, read back from the DOM.
SHOWN = """JSON.stringify(Array.from(document.querySelectorAll('[data-key]')).map(
  e => [e.dataset.key, e.dataset.value, e.textContent, e.dataset.unknown || null]))"""


def summary_value(summary: dict, key: str):
    """The value a data-key names, found by walking the summary (headline figures computed here instead)."""
    if key.startswith("headline."):
        done = [st for r in summary["ranks"] for st in r["steps"] if st.get("complete", True)]  # as the totals
        n = len(done)
        tot = lambda k: sum(st[k] for st in done)
        if not n:
            return None
        return {
            "step_us": tot("wall_us") / n,
            "exposed_share": tot("exposed_comm_us") / tot("wall_us"),
            "overlap_ratio": tot("hidden_comm_us") / tot("comm_us") if tot("comm_us") else None,
            "comm_us": tot("comm_us") / n,
        }[key[9:]]
    return functools.reduce(lambda d, k: d[int(k)] if isinstance(d, list) else d[k], key.split("."), summary)


def check_numbers(page, summary: dict) -> int:
    import json

    shown = json.loads(page.eval(SHOWN))
    assert shown, "no numbers on the page"
    for key, value, text, unknown in shown:
        want = summary_value(summary, key)
        if unknown is not None:  # shown as unknown: the raw value kept, and the reason true of the summary
            assert text == "—" and (value == "null" or float(value) == (want or 0)), key
            assert unknown_is_right(summary, key, want), (key, want, unknown)
        elif want is None:
            assert value == "null" and text == "—", key
        else:
            assert math.isclose(float(value), want, rel_tol=1e-9, abs_tol=1e-9), (key, value, want)
            assert text.strip() and text != "—", key
    return len(shown)


def unknown_is_right(summary: dict, key: str, value) -> bool:
    """A figure may read — although the summary has a number: a collective's size of 0 bytes (not recorded), the
    bandwidth of such a collective, and a rank's totals when it has no complete step."""
    if value is None:
        return True
    parts = key.split(".")
    row = functools.reduce(lambda d, k: d[int(k)] if isinstance(d, list) else d[k], parts[:-1], summary)
    if parts[-1] == "bytes":
        return not value
    if parts[-1].endswith("gbps"):
        return not row.get("bytes")
    if len(parts) == 4 and parts[0] == "ranks" and parts[2] == "totals":
        return not any(st.get("complete", True) for st in summary["ranks"][int(parts[1])]["steps"])
    return False


def check_timeline(page, timeline: dict) -> None:
    """The bars plotly drew (its data on the chart's div) add up, per rank and category, to the record's pieces."""
    import json

    drawn = json.loads(
        page.eval("""JSON.stringify(document.getElementById('chart-timeline').data.map(
      t => [t.name, t.y, t.x]))""")
    )
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
