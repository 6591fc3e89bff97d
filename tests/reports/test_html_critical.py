"""The critical path on the HTML report: the lane on the timeline adds up to the path, the page renders without
console errors, every figure shown equals the summary, and the what-if table's figures equal `tracekit whatif
--format json --set SPEC` on the same traces (its own load, analysis and graph: an independent path)."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from tests.helpers.data import real_trace
from tests.helpers.report_page import ARTIFACTS, check_numbers
from tracekit.cli import cli
from tracekit.reports.html_critical import downsample_note
from tracekit.reports.timeline_drawing import PATH_KINDS, critical_lane

OPTS = ["--no-cache", "--executor", "serial"]


def _summary(segments) -> dict:
    by_kind = {k: sum(s["dur_us"] for s in segments if s["kind"] == k) for k in PATH_KINDS}
    step = {"step": 3, "length_us": sum(by_kind.values()), "by_kind": by_kind, "verdict": "step 3: x", "segments": segments}
    return {"critical_path": {"verdict": "1 step: x", "steps": [{**step, "step": 2, "segments": []}, step]}}


def _seg(start, dur, kind, name="k"):
    return {"rank": 0, "lane": "stream 7", "name": name, "start_us": 1e6 + start, "dur_us": dur, "kind": kind}


def test_lane_of_the_timeline_step_adds_up_to_its_path():
    segs = [
        _seg(0, 10, "host"),
        _seg(10, 5, "idle"),
        _seg(15, 30, "compute", "gemm<1>"),
        _seg(45, 0, "host"),
        _seg(45, 20, "compute", "relu"),
        _seg(65, 5, "comm_wait"),
    ]
    lane = critical_lane(_summary(segs), 3)
    assert lane["step"] == 3 and lane["total"] == lane["shown"] == 5  # the zero-length segment is not drawn
    assert lane["segments"][0][:3] == [0.0, 10.0, "host"] and lane["segments"][2][5] == "gemm<1>"
    for k in PATH_KINDS:
        assert sum(b[1] for b in lane["segments"] if b[2] == k) == pytest.approx(sum(s["dur_us"] for s in segs if s["kind"] == k))
    assert critical_lane(_summary(segs), 99)["step"] == 2  # a step without a path: the first step's
    assert critical_lane({}, 3) is None


def test_lane_above_the_limit_merges_runs_then_gaps_and_says_so():
    segs = [_seg(2 * i, 2, "compute" if i % 3 else "host", f"k{i}") for i in range(300)]
    lane = critical_lane(_summary(segs), 3, max_events=250)  # runs of two compute segments merge: 200 bars
    assert lane["shown"] == 200 and lane["total"] == 300 and lane["merge_gap_us"] == 0.0
    assert sum(b[1] for b in lane["segments"]) == pytest.approx(600.0) and downsample_note(lane) is None
    lane = critical_lane(_summary(segs), 3, max_events=20)
    assert 1 <= lane["shown"] <= 20 and lane["merge_gap_us"] > 0
    assert "--max-timeline-events" in downsample_note(lane)


def _shown(page) -> dict:
    return {
        k: v
        for k, v, _ in json.loads(
            page.eval(
                "JSON.stringify(Array.from(document.querySelectorAll('[data-key]'))"
                ".map(e => [e.dataset.key, e.dataset.value, 0]))"
            )
        )
    }


def test_report_with_critical_path_in_browser(browser, tmp_path):
    traces = [str(real_trace(f"pp-sendrecv-128rank-rank{r}")) for r in (0, 1)]
    out = tmp_path / "cp.html"
    res = CliRunner().invoke(cli, ["report", *traces, *OPTS, "--critical-path", "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["analyze", *traces, *OPTS, "--critical-path", "--format", "json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)  # the same analysis, written as JSON by another command
    page = browser.load(out)
    try:
        assert page.errors() == []
        assert int(page.eval("document.body.dataset.criticalRendered")) >= 1
        check_numbers(page, summary)
        drawn = json.loads(
            page.eval("""JSON.stringify(document.getElementById('chart-timeline').data
            .filter(t => t.name.startsWith('path: ')).map(t => [t.name, t.y, t.x]))""")
        )
        step = json.loads(page.eval("document.getElementById('tracekit-data').textContent"))["critical"]["step"]
        (path,) = [s for s in summary["critical_path"]["steps"] if s["step"] == step]
        for name, ys, xs in drawn:
            assert set(ys) == {"critical path"}
            assert sum(xs) == pytest.approx(path["by_kind"][name[6:]], abs=1e-3 * len(xs))
        assert sum(sum(xs) for _, _, xs in drawn) == pytest.approx(path["length_us"], rel=1e-6)
        assert page.eval("document.getElementById('critical-verdict').innerText") == summary["critical_path"]["verdict"]
        shown = _shown(page)
        answers = summary["critical_path"]["whatif"]["answers"]
        questions = [a["question"] for a in answers]
        assert questions[:3] == ["no change (identity replay)", "world communication free", "world at 2x bandwidth"]
        assert questions[3].startswith("rank ") and questions[3].endswith("extra host time gone")
        for i, a in enumerate(answers):
            sets = [x for s in a["specs"] for x in ("--set", s)]
            res = CliRunner().invoke(cli, ["whatif", *traces, *OPTS, *sets, "--format", "json"])
            assert res.exit_code == 0, res.output
            doc = json.loads(res.output)
            for field in ("measured_us", "predicted_us"):
                want = sum(s[field] for s in doc["steps"])
                assert math.isclose(float(shown[f"critical_path.whatif.answers.{i}.{field}"]), want, rel_tol=1e-9), (
                    a["question"],
                    field,
                )
            assert float(shown["critical_path.whatif.replay_error"]) == doc["replay_error"]
        page.screenshot(ARTIFACTS / "report-critical-path.png")
    finally:
        page.close()


def test_hostile_names_on_the_path_and_in_the_table_stay_text(browser, tmp_path):
    from tests.helpers.report_fixtures import BOLD_NAME, XSS_IMG, XSS_SCRIPT, make_summary, make_timeline
    from tests.helpers.report_page import open_report

    summary = make_summary(n_ranks=2, n_steps=3, per_step=4)
    segs = [_seg(0, 10, "host", XSS_SCRIPT), _seg(10, 30, "compute", XSS_IMG), _seg(40, 5, "comm_transfer", BOLD_NAME)]
    section = _summary(segs)["critical_path"]
    section["steps"][1]["step"] = 1  # make_timeline's step
    section["steps"][1]["verdict"] = f"step 1: 100 % {XSS_SCRIPT}"
    section["whatif"] = {
        "steps": 2,
        "replay_error": 0.0125,
        "notes": [XSS_IMG],
        "answers": [
            {
                "question": "no change (identity replay)",
                "specs": [],
                "measured_us": 45.0,
                "predicted_us": 45.0,
                "saving_share": 0.0,
                "notes": [],
            },
            {
                "question": f"{BOLD_NAME} communication free",
                "specs": [f"comm:{BOLD_NAME}=0"],
                "measured_us": 45.0,
                "predicted_us": 40.0,
                "saving_share": 5 / 45,
                "notes": [XSS_SCRIPT],
            },
        ],
    }
    summary["critical_path"] = section
    _, page = open_report(browser, tmp_path, summary, "critical-hostile", timeline=make_timeline(n_ranks=2))
    try:
        assert page.errors() == []
        assert page.eval("window.__tk_pwned === undefined") is True
        assert page.eval("document.body.dataset.criticalRendered") == "3"
        text = page.eval("document.getElementById('whatif').innerText + document.getElementById('critical-path').innerText")
        assert XSS_SCRIPT in text and XSS_IMG in text and BOLD_NAME in text and "1.250%" in text
        assert page.eval("document.querySelectorAll('main script, main img, main b').length") == 0
        check_numbers(page, summary)
        hover = page.eval("""JSON.stringify(document.getElementById('chart-timeline').data
            .filter(t => t.name.startsWith('path: ')).map(t => t.customdata.map(c => c[4])))""")
        assert "&lt;script&gt;" in hover and "<script>" not in hover  # escaped before plotly reads it as HTML
    finally:
        page.close()
