"""Bounded-time fuzzing of the documents tracekit reads back (summaries used as baselines, by `diff` and by
`report --summary`): a real summary with one value replaced by a hostile one (another type, NaN, an extreme
number, a control character, a deep list) or one key deleted. The only acceptable outcomes of every command
are its documented exit codes with at most one error line, never an exception, and JSON output that a
strict parser reads (no NaN tokens). TRACEKIT_FUZZ_EXAMPLES raises the example count."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracekit
from tests.helpers.data import gpu_trace
from tracekit.cli import cli

EXAMPLES = int(os.environ.get("TRACEKIT_FUZZ_EXAMPLES", 40))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
HOSTILE = [
    None,
    True,
    -1,
    0,
    2**63,
    -(2**70),
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    1e-320,
    "",
    "abc",
    "\x1b[31mred\x07",
    "<script>alert(1)</script>",
    [],
    [1, "x"],
    {},
    {"a": None},
    json.loads("[" * 300 + "]" * 300),
]


@cache
def real_summary() -> dict:
    return tracekit.analyze(tracekit.load(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"))).to_dict()


def _paths(doc, prefix=()):
    """Every (path) into the document: keys of objects, indices of (the first few items of) lists."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _paths(v, (*prefix, i))


@cache
def all_paths() -> tuple[tuple, ...]:
    return tuple(p for p in _paths(real_summary()) if p and not (p[0] == "run" and len(p) > 2 and p[1] == "manifest"))


def _mutate(doc: dict, path: tuple, value, delete: bool) -> dict:
    doc = json.loads(json.dumps(doc))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@FUZZ
@given(st.integers(0, 10**6), st.sampled_from(HOSTILE), st.booleans(), st.integers(0, 3))
def test_hostile_summary_documents(tmp_path_factory, which, value, delete, command):
    tmp = tmp_path_factory.mktemp("fuzz")
    paths = all_paths()
    bad = tmp / "bad.json"
    bad.write_text(json.dumps(_mutate(real_summary(), paths[which % len(paths)], value, delete)))
    good = tmp / "good.json"
    good.write_text(json.dumps(real_summary()))
    args = [
        ["check", str(good), "--baseline", str(bad), "--budget", "exposed_comm_share<=0.5", "--json", str(tmp / "v.json")],
        ["diff", str(bad), str(good), "--format", "json"],
        ["report", "--summary", str(bad), "-o", str(tmp / "r.html")],
        ["baseline", str(bad), "-o", str(tmp / "b.json")],
    ][command]
    res = CliRunner().invoke(cli, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert res.exit_code in (0, 1, 2, 3), (args, res.exit_code)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("tracekit: error:")]
    assert len(errors) <= 1 and (res.exit_code in (0, 1) or len(errors) == 1), res.stderr
    if res.exit_code in (0, 1):
        for out in [tmp / "v.json", tmp / "b.json"] + ([] if command != 1 else [None]):
            text = res.stdout if out is None else (out.read_text() if Path(out).exists() else None)
            if text:
                msgspec.json.decode(text)  # strict JSON: NaN or Infinity tokens would fail here


@cache
def critical_summary() -> dict:
    """Two ranks with the critical path and its what-if table: the typed sections the first summary lacks."""
    traces = tracekit.load([gpu_trace("pp-sendrecv-128rank-rank0.json.gz"), gpu_trace("pp-sendrecv-128rank-rank1.json.gz")])
    return tracekit.analyze(traces, critical_path=True).to_dict()


@cache
def critical_paths() -> tuple[tuple, ...]:
    return tuple(p for p in _paths(critical_summary()) if p and p[0] == "critical_path")


@FUZZ
@given(st.integers(0, 10**6), st.sampled_from(HOSTILE), st.booleans(), st.integers(0, 1))
@pytest.mark.slow
def test_hostile_critical_path_sections(tmp_path_factory, which, value, delete, command):
    """report --summary draws the critical path; check reads the rest: a hostile value anywhere in the section is
    a pass (the section is not the gate's), exit 2/3 and one line, never a traceback."""
    tmp = tmp_path_factory.mktemp("fuzzcp")
    paths = critical_paths()
    bad = tmp / "bad.json"
    bad.write_text(json.dumps(_mutate(critical_summary(), paths[which % len(paths)], value, delete)))
    args = [
        ["report", "--summary", str(bad), "-o", str(tmp / "r.html")],
        ["check", str(bad), "--budget", "exposed_comm_share<=1", "--json", str(tmp / "v.json")],
    ][command]
    res = CliRunner().invoke(cli, args)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert res.exit_code in (0, 1, 2, 3), (args, res.exit_code, res.output)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("tracekit: error:")]
    assert len(errors) <= 1 and (res.exit_code in (0, 1) or len(errors) == 1), res.stderr
