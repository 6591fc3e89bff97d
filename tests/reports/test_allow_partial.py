"""A truncated run (issue 32): `analyze` and `report` exit 3 and name --allow-partial; with it they show the steps,
marked partial, their figures never in a total; the loss warning says what was kept and, beside a whole rank of the
same job, about how much of a whole rank's device activity that is (checked against a count of the raw JSON)."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from click.testing import CliRunner

from tests.helpers.data import real_trace
from tests.helpers.report_page import check_numbers
from tracekit.cli import cli

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def _cut(src, dst, share: float) -> bytes:
    data = gzip.open(src).read()
    dst.write_bytes(data[: int(len(data) * share)])
    return data


def _device_events_per_step(text: bytes) -> float:
    """The oracle: complete events of the raw JSON (a cut file parsed up to its last whole event), by category."""
    body = text.decode("utf-8", "replace")
    start = body.index("[", body.index('"traceEvents"')) + 1
    events, dec, i = [], json.JSONDecoder(), start
    while True:
        j = body.find("{", i)
        if j < 0:
            break
        try:
            e, i = dec.raw_decode(body, j)
        except json.JSONDecodeError:
            break
        events.append(e)
    dev = sum(1 for e in events if e.get("cat") in DEVICE_CATS and e.get("ph") == "X")
    steps = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    return dev / steps


@pytest.fixture(scope="module")
def cut_run(tmp_path_factory):
    """Ranks 0 (whole) and 1 (its file cut at 60 % of its JSON) of one 128-rank GPU job."""
    d = tmp_path_factory.mktemp("cut")
    (d / "rank0.json.gz").write_bytes(open(real_trace("pp-sendrecv-128rank-rank0"), "rb").read())
    _cut(real_trace("pp-sendrecv-128rank-rank1"), d / "rank1.json", 0.6)
    return d


def test_a_truncated_trace_is_refused_with_the_way_forward_then_shown_partial(tmp_path):
    cut = tmp_path / "cut.json"
    _cut(real_trace("allreduce-broadcast-2rank-rank0"), cut, 0.6)
    res = CliRunner().invoke(cli, ["analyze", str(cut), "--no-cache"])
    assert res.exit_code == 3
    assert "--allow-partial" in res.output and "re-export" not in res.output
    res = CliRunner().invoke(cli, ["analyze", str(cut), "--no-cache", "--allow-partial", "--width", "160"])
    assert res.exit_code == 0, res.output
    assert "partial steps (3): figures from incomplete data, left out of every total" in res.output
    assert re.search(r"│ 0\s+│ 0/3\s+│", res.output)  # no complete step: no totals, never zeros
    assert "step time (mean): —" in res.output
    assert "truncated at byte 5,867,334: the file ends mid-event" in res.output and "(71 bytes)" not in res.output
    res = CliRunner().invoke(cli, ["analyze", str(cut), "--no-cache", "--allow-partial", "--format", "json"])
    doc = json.loads(res.output)
    assert [s["complete"] for s in doc["ranks"][0]["steps"]] == [False] * 3
    assert all(s["wall_us"] > 0 for s in doc["ranks"][0]["steps"])


def test_the_loss_is_measured_against_a_whole_rank_of_the_same_job(cut_run):
    res = CliRunner().invoke(cli, ["analyze", str(cut_run), "--no-cache", "--format", "json", "--executor", "serial"])
    assert res.exit_code == 0, res.output  # rank 0 is whole: no --allow-partial needed
    doc = json.loads(res.output)
    (w,) = [w for w in doc["warnings"] if w.startswith("rank 1: truncated trace: kept")]
    share = float(re.search(r"about ([\d.]+) % of the device events per step of the 1 whole rank", w).group(1)) / 100
    want = _device_events_per_step((cut_run / "rank1.json").read_bytes()) / _device_events_per_step(
        gzip.open(cut_run / "rank0.json.gz").read()
    )
    assert 0.05 < want < 0.95 and share == pytest.approx(want, abs=0.0006)
    assert "let the profiler finish writing" in w


def test_report_allow_partial_marks_the_steps_in_the_browser(browser, tmp_path):
    cut = tmp_path / "cut.json"
    _cut(real_trace("allreduce-broadcast-2rank-rank0"), cut, 0.6)
    out = tmp_path / "partial.html"
    res = CliRunner().invoke(cli, ["report", str(cut), "--no-cache", "-o", str(out)])
    assert res.exit_code == 3 and "--allow-partial" in res.output
    res = CliRunner().invoke(cli, ["report", str(cut), "--no-cache", "--allow-partial", "-o", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads(
        CliRunner().invoke(cli, ["analyze", str(cut), "--no-cache", "--allow-partial", "--format", "json"]).output
    )
    page = browser.load(out)
    try:
        assert page.errors() == []
        assert page.eval("document.querySelectorAll('#steps tbody tr.partial').length") == 3
        assert "3 steps partial" in page.eval("document.querySelector('.partial-note').textContent")
        totals = page.eval("Array.from(document.querySelectorAll('table.ranks tbody td.n')).map(t => t.textContent)")
        assert totals and set(totals) == {"—"}  # out of every total
        assert page.eval("document.querySelectorAll('table.ranks [data-unknown]').length") == len(totals)
        check_numbers(page, summary)  # the partial steps' figures are the summary's
    finally:
        page.close()
