"""The gate reads the typed summary (formats.summary.SummaryDoc) whichever way the summary came, and writes its
verdict and diff from formats Structs through the one encoder: no NaN or Infinity token, every file read back by
its Struct. The figures are checked against the hand-built runs' known answers and a fresh analysis against its
own saved summary."""

from __future__ import annotations

import json
import math

import msgspec
import pytest
from click.testing import CliRunner

import tracekit
from tests.helpers.data import gpu_trace
from tests.helpers.summaries import tp_run
from tracekit.cli import cli
from tracekit.errors import IncomparableRunsError
from tracekit.formats.documents import read_diff, read_verdict
from tracekit.formats.summary import SummaryDoc
from tracekit.gate import explain, run_gate
from tracekit.gate.metrics import DIM_METRICS, RUN_METRICS, RunMetrics
from tracekit.gate.source import load_summary

TRACE = gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _strict_json(text: str):
    """JSON as any other parser reads it: the tokens NaN/Infinity refused."""

    def refuse(token):
        raise AssertionError(f"{token} token in the output")

    return json.loads(text, parse_constant=refuse)


def _tiny_baseline(tmp_path):
    """A baseline whose exposed time is the smallest float: a +1000 µs change is +inf%."""
    base = tp_run([5e-324] * 3, comm_each=5e-324)
    for r in base["ranks"]:
        for s in r["steps"]:
            s["exposed_comm_us"] = 5e-324
    (tmp_path / "a.json").write_text(json.dumps(base))
    (tmp_path / "b.json").write_text(json.dumps(tp_run([1000.0] * 3)))
    return tmp_path / "a.json", tmp_path / "b.json"


def test_check_json_never_writes_infinity_and_reads_back(tmp_path):
    a, b = _tiny_baseline(tmp_path)
    r = _run("check", b, "--baseline", a, "--json", tmp_path / "v.json")
    assert r.exit_code == 1 and "+inf%" in r.output  # the terminal line says what happened
    verdict = _strict_json((tmp_path / "v.json").read_text())  # the file wrote `Infinity` before
    whole = next(c for c in verdict["checks"] if c["name"] == "exposed_comm_us")
    assert whole["change"] is None and whole["passed"] is False and whole["current"]["median"] == 1000.0
    doc = read_verdict(tmp_path / "v.json")  # tracekit's own reader takes it: the verdict's Struct
    assert doc.passed is False and len(doc.checks) == len(verdict["checks"]) == 5
    assert doc.checks[0].change is None and doc.checks[0].current.median == 1000.0


def test_diff_json_is_the_diff_struct_and_never_nan(tmp_path):
    a, b = _tiny_baseline(tmp_path)
    r = _run("diff", a, b, "--format", "json")
    assert r.exit_code == 0
    data = _strict_json(r.output)
    (tmp_path / "d.json").write_text(r.output)
    back = read_diff(tmp_path / "d.json")
    assert back.schema == "tracekit.diff/1" and [x.label for x in back.by_dimension] == [
        x["label"] for x in data["by_dimension"]
    ] == ["tp/all_gather", "tp/reduce_scatter", "whole run"]
    ag = back.by_dimension[0]
    assert ag.b.exposed_comm_us == 1000.0 and ag.a.count == 1.0 and back.by_dimension[2].a.count is msgspec.UNSET
    # an overflowing split (exposed far above comm) is null, not Infinity and not a made-up 0
    row = explain("x", {"comm_us": 5e-324, "exposed_comm_us": 1e18}, {"comm_us": 10.0, "exposed_comm_us": 5.0})
    assert math.isinf(row.more_comm_us) and row.to_dict()["more_comm_us"] is None
    assert row.to_dict()["less_overlap_us"] is None and row.to_dict()["exposed_delta_us"] == -1e18


def test_a_fresh_analysis_and_its_saved_summary_gate_alike(tmp_path):
    """The analyzer's dict goes through the Struct a file does: same type, every figure equal, on a real trace."""
    fresh = load_summary(TRACE)
    saved = tmp_path / "s.json"
    saved.write_text(json.dumps(tracekit.analyze(tracekit.load(TRACE)).to_dict()))
    read = load_summary(saved)
    assert type(fresh.doc) is type(read.doc) is SummaryDoc
    assert fresh.doc == read.doc
    for m in RUN_METRICS:
        assert fresh.stat(m) == read.stat(m), m
    assert fresh.scopes() == read.scopes() and fresh.scopes()
    for scope in fresh.scopes():
        for m in DIM_METRICS:
            assert fresh.stat(m, scope) == read.stat(m, scope), (scope, m)
    # the hand-built answer: the exposed share is exposed / wall of the same steps
    st = read.stat("exposed_comm_share")
    rows = [s for r in read.doc.ranks for s in r.steps if s.complete]
    assert st is not None and st.samples == len(rows)


def test_baseline_writes_the_document_as_written(tmp_path):
    """`tracekit baseline` of a summary keeps keys a later minor revision adds (the Struct drops them)."""
    data = {**tp_run([10.0, 12.0]), "schema": "tracekit.summary/1.4", "added_later": {"x": 1}}
    (tmp_path / "s.json").write_text(json.dumps(data))
    assert _run("baseline", tmp_path / "s.json", "-o", tmp_path / "b.json").exit_code == 0
    assert json.loads((tmp_path / "b.json").read_text()) == data
    assert not hasattr(load_summary(tmp_path / "b.json").doc, "added_later")


def test_run_totals_are_not_compared_with_per_step_medians(tmp_path):
    """A baseline with only run totals (no step rows) against a per-step run: its total of 3 steps is 3x the
    per-step median, so a 2x regression passed before. Now refused as incomparable (exit 3)."""
    base = tp_run([100.0] * 3)
    for r in base["ranks"]:
        r["steps"] = []
    now = tp_run([200.0] * 3)
    with pytest.raises(
        IncomparableRunsError,
        match=r"exposed_comm_us is a run total in the baseline and a median "
        r"over steps in this run",
    ):
        run_gate(RunMetrics(now, "now.json"), RunMetrics(base, "base.json"))
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "now.json").write_text(json.dumps(now))
    r = _run("check", tmp_path / "now.json", "--baseline", tmp_path / "base.json")
    assert r.exit_code == 3 and "record the baseline from traces with step rows" in r.output
    # like with like still compares: both per step
    assert run_gate(RunMetrics(tp_run([100.0] * 3)), RunMetrics(tp_run([100.0] * 3))).passed


def test_dimension_totals_are_not_compared_with_per_step_instances():
    """A summary that kept only the most exposed instances gives its dimension figures as run totals."""
    base = tp_run(
        [100.0] * 3,
        by_dimension=[
            {
                "dimension": "tp",
                "op": "all_gather",
                "count": 6,
                "bytes": 0,
                "comm_us": 2400.0,
                "hidden_comm_us": 1800.0,
                "exposed_comm_us": 600.0,
            },
            {
                "dimension": "tp",
                "op": "reduce_scatter",
                "count": 6,
                "bytes": 0,
                "comm_us": 2400.0,
                "hidden_comm_us": 2400.0,
                "exposed_comm_us": 0.0,
            },
        ],
    )
    base["collectives_limit"] = {"limit": 1, "total": 12, "omitted": 11}
    with pytest.raises(IncomparableRunsError, match="TRACEKIT_MAX_COLLECTIVE_ROWS"):
        run_gate(RunMetrics(tp_run([100.0] * 3)), RunMetrics(base))


def test_a_verdict_given_as_dicts_is_validated_like_a_file():
    """The report reads the verdict's Struct; a dict handed to the reporter goes through the same Struct, so a
    wrong shape is one ConfigError line (before: a TypeError out of the number formatting)."""
    from tracekit.errors import ConfigError
    from tracekit.reports import view

    good = {
        "passed": False,
        "baseline": "b.json",
        "checks": [
            {
                "kind": "budget",
                "name": "overlap_ratio>=0.5",
                "passed": False,
                "message": "m",
                "metric": "overlap_ratio",
                "current": {"median": 0.25},
                "baseline": None,
                "limit": 0.5,
                "op": ">=",
            },
            {"name": "x", "value": 1.0, "baseline": 2.0, "budget": "x<=3", "passed": True, "message": ""},
        ],
    }
    rows = view.verdict(good)["checks"]
    assert [(r["name"], r["value"], r["budget"], r["passed"]) for r in rows] == [
        ("overlap_ratio>=0.5", "25.0 %", ">= 50.0 %", False),
        ("x", "1", "x<=3", True),
    ]
    with pytest.raises(ConfigError, match=r"\$\.checks\[0\]\.limit"):
        view.verdict({"passed": True, "checks": [{"passed": True, "limit": "half"}]})
