"""The output layer's table: each reporter listed once, each (document, format) selectable, and each renders
its document to a stream of the kind it declares (text or bytes) or to a file."""

from __future__ import annotations

import gzip
import io
import json
import warnings
from collections.abc import Mapping
from types import SimpleNamespace

import pytest

import tracekit
from tests.helpers.flight import flight_timing, hang_report
from tests.helpers.report_fixtures import make_summary
from tracekit import gate
from tracekit.analyzers import ANALYZERS
from tracekit.analyzers.comm.inventory import Inventory
from tracekit.analyzers.comm.timeline_record import median_step
from tracekit.analyzers.flight.results import HangReport
from tracekit.analyzers.flight.timing_results import FlightTiming
from tracekit.analyzers.memory.activation_compare import ModelEstimate, estimate_memory
from tracekit.analyzers.memory.activation_model import MemoryConfig
from tracekit.errors import ConfigError
from tracekit.formats.contract import SUMMARY_SCHEMA, exposed_comm_share
from tracekit.gate import DiffResult, GateReport, RunMetrics, diff, parse_budget, run_gate
from tracekit.reports import REPORTERS, GateError, get_reporter
from tracekit.reports.junit import write_junit
from tracekit.reports.perfetto import TraceAnnotation
from tracekit.reports.perfetto_merge import MergedTrace, MergeRank
from tracekit.reports.workload import WorkloadDigest


def _summary() -> dict:
    return make_summary(n_ranks=2, n_steps=3, hostile=False)


def documents() -> dict[type, object]:
    """One document of every type a reporter renders."""
    s = _summary()
    run = RunMetrics(s, "run")
    inv = Inventory(
        2,
        (
            {
                "rank": 0,
                "device_type": "cuda",
                "events": 1234,
                "kinds": {"kernel": 10, "comm": 2},
                "steps": [1, 2],
                "streams": ["0:7"],
                "generation": {"ts": "int"},
                "collectives": {},
                "comm_by_library": {},
                "process_groups": [],
            },
        ),
        ("a warning",),
    )
    digest = WorkloadDigest(
        SimpleNamespace(
            losses=(2.0, 1.5), comm_stats=({"tracekit:tp|all_gather": [4, 2**20]},), overheads=({},), out_dir="out/run"
        ),
        s,
    )
    trace = {"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 0.0, "dur": 5.0}]}
    return {
        Mapping: s,
        GateReport: run_gate(run, budgets=(parse_budget("overlap_ratio>=0.1"),)),
        DiffResult: diff(run, run),
        Inventory: inv,
        ModelEstimate: estimate_memory(MemoryConfig(64, 2, 64, 8)),
        WorkloadDigest: digest,
        TraceAnnotation: TraceAnnotation(trace, {"exposed comm": [[1.0, 2.0]]}),
        MergedTrace: _merged(trace),
        GateError: GateError("baseline: 4 ranks, current: 2", 2, "run", "baseline.json"),
        HangReport: hang_report(),
        FlightTiming: flight_timing(),
    }


def _merged(trace: dict) -> MergedTrace:
    import msgspec

    from tracekit.loader.passthrough import TraceBytes

    raw = TraceBytes({"traceEvents": msgspec.Raw(json.dumps(trace["traceEvents"]).encode())}, frozenset({1}))
    return MergedTrace([MergeRank(r, lambda: raw, 1000 * r) for r in (0, 1)], 0, {"critical path": [[1.0, 2.0]]})


def _document_for(r) -> object:
    docs = documents()
    return docs[r.document] if r.document in docs else docs[Mapping]


def test_each_reporter_is_listed_once():
    assert len({type(r) for r in REPORTERS}) == len(REPORTERS)
    keys = [(r.document, r.format) for r in REPORTERS]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("reporter", REPORTERS, ids=lambda r: f"{type(r).__name__}")
def test_each_format_is_selectable_and_renders_to_its_kind_of_stream(reporter):
    doc = _document_for(reporter)
    assert get_reporter(reporter.format, document=type(doc)) is reporter
    stream = io.BytesIO() if reporter.binary else io.StringIO()
    done = reporter.render(doc, stream)
    assert done.path is None and stream.getvalue()


@pytest.mark.parametrize("reporter", REPORTERS, ids=lambda r: f"{type(r).__name__}")
def test_each_reporter_writes_a_file_and_says_its_size(reporter, tmp_path):
    out = tmp_path / "sub" / f"out{reporter.suffix or '.txt'}"
    done = reporter.render(_document_for(reporter), out)
    assert done.path == out and done.size_bytes == out.stat().st_size > 0


def test_the_formats_each_command_offers_have_a_reporter():
    for document, formats in (
        (Mapping, ("table", "json", "html")),
        (Inventory, ("table", "json")),
        (ModelEstimate, ("table", "json")),
        (DiffResult, ("text", "json")),
        (GateReport, ("text", "json", "junit", "markdown")),
        (WorkloadDigest, ("text",)),
        (TraceAnnotation, ("perfetto",)),
        (HangReport, ("table", "json", "markdown")),
        (FlightTiming, ("table", "json", "markdown")),
    ):
        for f in formats:
            assert get_reporter(f, document=document).format == f


def test_suffix_selects_among_the_reporters_of_the_document():
    assert get_reporter(out="r.html").format == "html"
    assert get_reporter(out="s.json").format == "json"
    assert get_reporter(out="gate.xml", document=GateReport).format == "junit"
    assert get_reporter(out="gate.md", document=GateReport).format == "markdown"
    assert get_reporter(out="ann.json.gz", document=TraceAnnotation).format == "perfetto"
    with pytest.raises(ConfigError, match=r"known: html \(\.html\), json \(\.json\), markdown \(\.md\)$"):
        get_reporter(out="r.txt")
    with pytest.raises(ConfigError):
        get_reporter("junit")  # not a reporter of a summary


def test_a_reporter_refuses_a_document_of_another_type():
    with pytest.raises(ConfigError):
        get_reporter("junit", document=GateReport).render(_summary(), io.BytesIO())
    with pytest.raises(ConfigError):
        get_reporter("table").render({"schema": "other/9"}, io.StringIO())


def test_json_options_and_perfetto_compression(tmp_path):
    s = _summary()
    text = get_reporter("json").render(s, tmp_path / "s.json", indent=None, newline=False).path.read_text()
    assert text == json.dumps(s) and json.loads(text)["schema"] == SUMMARY_SCHEMA
    ann = documents()[TraceAnnotation]
    out = get_reporter("perfetto", document=TraceAnnotation).render(ann, tmp_path / "a.json.gz").path
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    assert [e["dur"] for e in events if e.get("cat") == "tracekit"] == [1.0]


def test_analyze_runs_the_explicit_tuple_and_the_old_name_still_imports():
    assert [a.name for a in ANALYZERS] == [
        "comm",
        "activation_memory",
        "steps",
        "breakdowns",
        "memory_timeline",
        "critical_path",
    ]
    with pytest.warns(DeprecationWarning):
        assert tracekit.Summary is tracekit.Analysis
    with pytest.warns(DeprecationWarning):
        assert gate.Summary is RunMetrics
    with pytest.warns(DeprecationWarning):
        assert gate.write_junit is write_junit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tracekit.Analysis.__name__ == "Analysis"


def test_one_definition_of_the_exposed_share_and_of_the_representative_step():
    assert exposed_comm_share(300.0, 1000.0) == 0.3
    assert exposed_comm_share(None, 1000.0) is None and exposed_comm_share(5.0, 0.0) is None
    assert median_step({1: [10.0, 12.0], 2: [30.0], 3: [20.0]}) == 3  # means 11, 30, 20: the middle is step 3
    assert median_step({1: [5.0], 2: [5.0]}) == 2  # a tie goes by step number
