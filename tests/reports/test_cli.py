"""`tracekit report` / `tracekit annotate` through click, and the terminal view's numbers."""

from __future__ import annotations

import gzip
import json
import math
import re

import pytest
from click.testing import CliRunner

from tests.helpers.data import GPU, real_trace
from tests.helpers.report_fixtures import make_summary, make_timeline
from tests.helpers.report_page import summary_value
from tests.reports.test_terminal import check, tables
from tracekit.cli import cli
from tracekit.reports.summary_tables import LABELS
from tracekit.reports.terminal import render_text
from tracekit.reports.view import headline, rank_totals


def test_report_from_summary_says_it_downsampled(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(make_summary()))
    (tmp_path / "t.json").write_text(json.dumps(make_timeline(n_ranks=4, pieces=20)))
    res = CliRunner().invoke(
        cli,
        [
            "report",
            "--summary",
            str(tmp_path / "s.json"),
            "--timeline",
            str(tmp_path / "t.json"),
            "-o",
            str(tmp_path / "r.html"),
            "--max-timeline-events",
            "50",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "--max-timeline-events" in res.stderr and "downsampled: " in res.stderr
    assert "Downsampled:" in (tmp_path / "r.html").read_text()


def test_report_usage_errors(tmp_path):
    res = CliRunner().invoke(cli, ["report", "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "exactly one" in res.stderr
    (tmp_path / "s.json").write_text(json.dumps({"schema": "x"}))
    res = CliRunner().invoke(cli, ["report", "--summary", str(tmp_path / "s.json"), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2 and "tracekit.summary/1" in res.stderr


def test_annotate_with_tracks_file(tmp_path):
    tracks = {"exposed comm": [[10.0, 20.0], [30.0, 35.5]], "comm dp": [[10.0, 40.0]]}
    (tmp_path / "tracks.json").write_text(json.dumps(tracks))
    src = GPU / "rocm-mi250-minitoy.json.gz"
    res = CliRunner().invoke(
        cli, ["annotate", str(src), "--tracks", str(tmp_path / "tracks.json"), "-o", str(tmp_path / "a.json.gz")]
    )
    assert res.exit_code == 0, res.output
    with gzip.open(tmp_path / "a.json.gz", "rt") as f:
        out = json.load(f)
    x = [e for e in out["traceEvents"] if e.get("cat") == "tracekit"]
    assert sum(e["dur"] for e in x if e["name"] == "exposed comm") == pytest.approx(15.5)
    assert sum(e["dur"] for e in x if e["name"] == "comm dp") == pytest.approx(30.0)


def test_terminal_shows_the_same_figures_as_the_html(tmp_path):
    s = make_summary(n_ranks=3, hostile=True)
    text = render_text(s, width=200, wide=True)
    for f in headline(s):
        assert f"{f.label}: {f.text}" in text
    rows = tables(text)["per rank (totals over complete steps)"]  # one unit per column: compared within rounding
    for r, row in zip(rank_totals(s), rows):
        for c in r["cells"]:
            check(row[LABELS[c.label]], c.value)
    assert "<script>document.title=" in text  # shown literally, rich markup escaped


FAST = ["--executor", "serial"]  # the Parquet cache (per test, conftest) makes the 2nd-4th loads cheap
SHOWN = re.compile(r'data-key="([^"]+)" data-value="([^"]*)"')


@pytest.mark.parametrize(
    "name", ["allreduce-broadcast-2rank-rank0", "pp-sendrecv-128rank-rank0", "ddp-allreduce-2rank-rank1-oldformat"]
)
def test_report_and_annotate_from_real_gpu_trace(tmp_path, name):

    path = real_trace(name)
    res = CliRunner().invoke(cli, ["analyze", *FAST, "--format", "json", "--out", str(tmp_path / "s.json"), str(path)])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "s.json").read_text())
    res = CliRunner().invoke(cli, ["report", *FAST, str(path), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    html = (tmp_path / "r.html").read_text()
    shown = SHOWN.findall(html)
    assert len(shown) > 20
    for key, value in shown:
        want = summary_value(summary, key)
        assert (value == "null") if want is None else math.isclose(float(value), want, rel_tol=1e-9, abs_tol=1e-9), key
    assert "timeline built from the summary's collectives only" not in html  # the analyzer's timeline is drawn

    res = CliRunner().invoke(cli, ["annotate", *FAST, str(path), "-o", str(tmp_path / "a.json")])  # no gzip: faster
    assert res.exit_code == 0, res.output
    events = json.loads((tmp_path / "a.json").read_text())["traceEvents"]
    ours = [e for e in events if e.get("cat") == "tracekit"]
    totals = summary["ranks"][0]["totals"]
    for track, key in (("exposed comm", "exposed_comm_us"), ("hidden comm", "hidden_comm_us")):
        pieces = [e["dur"] for e in ours if e["name"] == track]
        # µs floats of epoch-scale times are spaced 0.25 µs apart: allow that much per piece
        assert sum(pieces) == pytest.approx(totals[key], abs=1e-6 + 0.25 * len(pieces)), track
    cols = summary["collectives"]
    for dim in {c["dimension"] for c in cols}:
        assert sum(e["dur"] for e in ours if e["name"] == f"comm {dim}") == pytest.approx(
            sum(c["dur_us"] for c in cols if c["dimension"] == dim), rel=1e-6
        )
    # the tracks are in the trace's own time base: each comm-track interval starts where a trace event starts
    starts = {round(float(e["ts"]), 1) for e in events if e.get("ph") == "X" and e.get("cat") != "tracekit"}
    comm = [e for e in ours if e["name"].startswith("comm ")]
    assert comm or not cols
    assert all(round(e["ts"], 1) in starts for e in comm)
