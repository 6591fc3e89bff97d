"""`tracekit report` draws the timeline from formats.documents.TimelineDoc whichever way it came (a file, the
summary's ``timeline`` key, the analysis): a wrong shape anywhere is one line naming the field, exit 2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.helpers.summaries import tp_run
from tracekit.cli import cli
from tracekit.errors import ConfigError
from tracekit.formats.documents import TimelineDoc, timeline_from_builtins
from tracekit.reports.timeline_drawing import from_collectives, prepare

BAD = {"schema": "tracekit.timeline/1", "ranks": [{"rank": 0, "intervals": [["a", 1.0, "compute"]]}]}


def test_a_summarys_timeline_of_the_wrong_shape_is_one_line(tmp_path):
    """Before: a TypeError traceback out of the interval check ('>=' between float and str)."""
    s = tmp_path / "s.json"
    s.write_text(json.dumps({**tp_run([10.0, 12.0]), "timeline": BAD}))
    r = CliRunner().invoke(cli, ["report", "--summary", str(s), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    (line,) = [x for x in r.output.splitlines() if x.startswith("tracekit: error:")]
    assert "$.ranks[0].intervals[0][0]" in line and "--timeline-out" in line


@pytest.mark.parametrize(
    "given",
    [BAD, {**BAD, "ranks": [{"rank": "0", "intervals": []}]}, {**BAD, "ranks": [{"rank": 0, "intervals": [[0.0, 1.0, "gpu"]]}]}],
)
def test_prepare_takes_the_struct_or_refuses(given):
    with pytest.raises(ConfigError, match=r"\$\.ranks\[0\]"):
        prepare({}, given)


def test_the_fallback_timeline_is_the_same_struct():
    """The collectives stand-in is read as a TimelineDoc too (prepare does); each bar is one collective of the
    median step."""
    summary = tp_run([10.0, 30.0, 20.0], ranks=2)
    tl = timeline_from_builtins(from_collectives(summary))
    assert isinstance(tl, TimelineDoc) and [r.rank for r in tl.ranks] == [0, 1]
    # every step has the same wall time: the middle step by number; its all_gather and its reduce_scatter
    assert {r.step for r in tl.ranks} == {2} and all(len(r.intervals) == 2 for r in tl.ranks)
    drawn = prepare(summary, None)
    assert drawn.source == "collectives" and drawn.total == 4


def test_a_minor_revision_summary_renders(tmp_path):
    """read_summary accepts tracekit.summary/1.x; the reporters' own check refused it (exit 2) before."""
    s = tmp_path / "s.json"
    s.write_text(json.dumps({**tp_run([10.0, 12.0]), "schema": "tracekit.summary/1.3", "added_later": [1]}))
    r = CliRunner().invoke(cli, ["report", "--summary", str(s), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r.html").stat().st_size > 10_000
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({**tp_run([10.0]), "schema": "tracekit.summary/2"}))
    r = CliRunner().invoke(cli, ["report", "--summary", str(bad), "-o", str(tmp_path / "r2.html")])
    assert r.exit_code == 2 and "tracekit.summary/2" in r.output
