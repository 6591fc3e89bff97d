"""tracekit.summary/1 read back through tracekit.formats: exact round trips of real summaries, one-line errors for
every wrong shape, and the schema doc checked against the Structs."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import msgspec
import pytest

import tracekit
from tests.helpers.data import gpu_trace
from tests.helpers.summaries import tp_run
from tracekit.errors import ConfigError, SummaryFormatError
from tracekit.formats import core
from tracekit.formats.documents import DiffDoc, TimelineDoc, VerdictDoc, read_timeline, read_verdict
from tracekit.formats.summary import SummaryDoc, as_dict, decode_summary, read_summary

DOCS = Path(__file__).resolve().parents[3] / "docs" / "summary-schema.md"


@pytest.fixture(scope="module")
def real_summary() -> dict:
    return tracekit.analyze(tracekit.load(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"))).to_dict()


def _write(tmp_path: Path, data: object, name: str = "s.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))  # Python's json: writes NaN/Infinity tokens, as a careless tool would
    return p


def test_a_real_summary_round_trips_exactly(real_summary, tmp_path):
    p = _write(tmp_path, real_summary)
    back = as_dict(read_summary(p))
    assert json.dumps(back) == json.dumps(real_summary)  # same keys, same order, same values, null kept


def test_gzip_by_magic_not_by_name(real_summary, tmp_path):
    p = tmp_path / "summary.json"  # gzip data under a plain name
    p.write_bytes(gzip.compress(json.dumps(real_summary).encode()))
    assert as_dict(read_summary(p)) == real_summary


def _mutated(summary: dict, edit) -> dict:
    s = json.loads(json.dumps(summary))
    edit(s)
    return s


BAD_SHAPES = {
    "rank is a string": (lambda s: s["ranks"][0].__setitem__("rank", "abc"), "$.ranks[0].rank"),
    "ranks of strings": (lambda s: s.__setitem__("ranks", ["0", "1"]), "$.ranks[0]"),
    "layout a list": (lambda s: s["run"].__setitem__("layout", [2, 2]), "$.run.layout"),
    "no totals": (lambda s: s["ranks"][0].pop("totals"), "totals"),
    "NaN": (lambda s: s["ranks"][0]["totals"].__setitem__("wall_us", float("nan")), "NaN"),
    "1e308": (lambda s: s["ranks"][0]["steps"][0].__setitem__("exposed_comm_us", 1e308), "$.ranks[0].steps[0].exposed_comm_us"),
    "Infinity": (lambda s: s["collectives"][0].__setitem__("dur_us", float("inf")), "Infinity"),
    "bytes negative huge": (lambda s: s["by_dimension"][0].__setitem__("bytes", -(2**63)), "$.by_dimension[0].bytes"),
    "wrong schema": (lambda s: s.__setitem__("schema", "tracekit.summary/2"), "tracekit.summary/2"),
    "schema lookalike": (lambda s: s.__setitem__("schema", "tracekit.summary/10"), "tracekit.summary/10"),
    "duplicate rank": (lambda s: s["ranks"].append(s["ranks"][0]), "appears twice"),
    "schema not a string": (lambda s: s.clear() or s.update({"schema": 5}), "schema is 5"),
    "a list, not an object": (lambda s: s.clear() or s.update({"schema": "tracekit.summary/1", "ranks": {}}), "$.ranks"),
}


@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_wrong_shapes_are_one_line_naming_the_field(real_summary, tmp_path, case):
    edit, where = BAD_SHAPES[case]
    p = _write(tmp_path, _mutated(real_summary, edit))
    with pytest.raises(SummaryFormatError) as err:
        read_summary(p)
    msg = str(err.value)
    assert "\n" not in msg and str(p) in msg and where in msg and "tracekit baseline" in msg


def test_minor_revisions_are_accepted(real_summary, tmp_path):
    p = _write(tmp_path, _mutated(real_summary, lambda s: s.update(schema="tracekit.summary/1.7", new_key=[1])))
    assert read_summary(p).schema == "tracekit.summary/1.7"


def test_nesting_too_deep_is_one_line(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text('{"schema": "tracekit.summary/1", "ranks": [], "run": {"manifest": {"a": ' + "[" * 5000 + "]" * 5000 + "}}}")
    with pytest.raises(SummaryFormatError, match="nested too deeply"):
        read_summary(p)


def test_not_a_regular_file(tmp_path):
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    with pytest.raises(SummaryFormatError, match="not a regular file"):
        read_summary(fifo)  # returns at once: a FIFO is never opened
    with pytest.raises(SummaryFormatError, match="not a regular file"):
        read_summary("/dev/zero")


def test_inflated_size_is_limited(tmp_path):
    p = tmp_path / "bomb.json.gz"
    p.write_bytes(gzip.compress(b'{"schema": "tracekit.summary/1", "ranks": []' + b" " * (8 * 2**20) + b"}"))
    assert p.stat().st_size < 100_000
    with pytest.raises(SummaryFormatError, match="more than 1,048,576 bytes"):
        read_summary(p, max_bytes=2**20)
    assert read_summary(p).ranks == []  # under the default limit it is a valid (empty) summary


def test_truncated_gzip_is_refused(real_summary, tmp_path):
    data = gzip.compress(json.dumps(real_summary).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(SummaryFormatError):
        read_summary(p)


def test_concatenated_gzip_members(real_summary, tmp_path):
    text = json.dumps(real_summary).encode()
    p = tmp_path / "two.json.gz"
    p.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]))
    assert as_dict(read_summary(p)) == real_summary


def test_encode_never_writes_nan():
    assert core.encode({"a": float("nan"), "b": [float("inf"), 1.5]}) == b'{"a":null,"b":[null,1.5]}'


def test_schema_policy():
    ok = core.schema_accepted
    assert ok("tracekit.summary/1", "tracekit.summary", 1) and ok("tracekit.summary/1.12", "tracekit.summary", 1)
    for bad in (
        "tracekit.summary/2",
        "tracekit.summary/1.",
        "tracekit.summary/1.x",
        "tracekit.summary/11",
        "tracekit.summary",
        None,
        1,
        "tracekit.gate/1",
    ):
        assert not ok(bad, "tracekit.summary", 1), bad


def test_absent_keys_take_their_defaults_so_every_reader_sees_every_key():
    doc = as_dict(
        decode_summary(
            b'{"schema": "tracekit.summary/1", "ranks": [{"rank": 0, "totals": '
            b'{"wall_us": 1, "compute_us": 0, "comm_us": 0, "hidden_comm_us": 0, '
            b'"exposed_comm_us": 0}}]}'
        )
    )
    assert doc["tracekit_version"] == "" and doc["collectives"] == [] and doc["warnings"] == []
    assert doc["run"]["device_type"] is None and doc["run"]["layout"] == {}  # identity: "not recorded"
    assert doc["ranks"][0]["steps"] == [] and doc["ranks"][0]["totals"]["idle_us"] is None
    assert "activation_memory" not in doc and "timeline" not in doc  # optional sections stay absent


# -- verdict and timeline ------------------------------------------------------------------------------------------


def test_verdict_and_timeline_shapes(tmp_path):
    good = {
        "schema": "tracekit.gate/1",
        "passed": False,
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
            }
        ],
    }
    assert core.to_builtins(read_verdict(_write(tmp_path, good))) == good
    plain = {
        "passed": True,
        "baseline": "b.json",
        "checks": [{"name": "x", "value": 1.0, "baseline": 2.0, "budget": "x<=3", "passed": True, "message": ""}],
    }
    assert core.to_builtins(read_verdict(_write(tmp_path, plain))) == plain
    for bad, where in (
        ({**good, "passed": "yes"}, "$.passed"),
        ({**good, "schema": "tracekit.gate/9"}, "gate/9"),
        ({**good, "checks": [{"passed": True, "limit": float("nan")}]}, "NaN"),
    ):
        with pytest.raises(ConfigError, match=re.escape(where)):
            read_verdict(_write(tmp_path, bad))
    tl = {
        "schema": "tracekit.timeline/1",
        "ranks": [{"rank": 0, "step": 1, "window_us": [0.0, 5.0], "intervals": [[0.0, 1.0, "compute"], [1.0, 2.0, "exposed"]]}],
    }
    assert json.loads(core.encode(read_timeline(_write(tmp_path, tl)))) == tl
    for bad, where in (
        ({**tl, "ranks": [{"rank": 0, "intervals": [[0, 1, "gpu"]]}]}, "$.ranks[0].intervals[0][2]"),
        ({**tl, "ranks": [{"rank": 0, "intervals": [[2, 1, "compute"]]}]}, "ends before it starts"),
        ({**tl, "ranks": {"0": []}}, "$.ranks"),
    ):
        with pytest.raises(ConfigError, match=re.escape(where)):
            read_timeline(_write(tmp_path, bad))


# -- the schema doc and the Structs say the same ----------------------------------------------------------------


def _struct_keys(t: object, out: set[str], skip: frozenset[str] = frozenset()) -> None:
    """Every field name reachable from a Struct type (through lists, unions, nested Structs); the fields named in
    ``skip`` count, their contents are not walked (a section documented in another file)."""
    info = msgspec.inspect.type_info(t)
    stack = [info]
    seen: set[type] = set()  # by Struct, not by field name: CheckDoc.baseline is walked though VerdictDoc has one
    while stack:
        i = stack.pop()
        if isinstance(i, msgspec.inspect.StructType):
            if i.cls in seen:
                continue
            seen.add(i.cls)
            for f in i.fields:
                out.add(f.name)
                if f.name not in skip:
                    stack.append(f.type)
        elif isinstance(i, (msgspec.inspect.ListType, msgspec.inspect.DictType)):
            stack.append(getattr(i, "item_type", None) or i.value_type)
        elif isinstance(i, msgspec.inspect.UnionType):
            stack.extend(i.types)


def test_summary_schema_doc_matches_the_structs():
    block = DOCS.read_text(encoding="utf-8").split("```json", 1)[1].split("```", 1)[0]
    # the free-form sub-documents (layout, activation memory) have keys of their own, documented elsewhere
    block = re.sub(r'"layout": \{[^}]*\}', '"layout": {}', block)
    block = re.sub(r'"activation_memory": \{.*?\n(?=  "warnings")', '"activation_memory": {}\n', block, flags=re.S)
    documented = set(re.findall(r'"([a-z_]+)":', block))
    declared: set[str] = set()
    # `{...}` here: docs/whatif.md and docs/activation-memory.md have them
    _struct_keys(SummaryDoc, declared, skip=frozenset({"critical_path", "activation_memory"}))
    declared -= {"timeline"}  # accepted from `report --summary` inputs, never written by the analyzer
    assert documented == declared, documented ^ declared


INPUTS = DOCS.parent / "report-inputs.md"


def _documented(path: Path, heading: str) -> set[str]:
    """The keys of the first ```json block after ``heading`` in ``path``."""
    text = path.read_text(encoding="utf-8")
    block = text[text.index(heading) :].split("```json", 1)[1].split("```", 1)[0]
    block = re.sub(r'"run": \{[^}]*\{[^}]*\}[^}]*\}', '"run": {}', block)  # the verdict's run identity: free-form
    return set(re.findall(r'"([a-z_][a-z_0-9]*)":', block))


@pytest.mark.parametrize(
    "heading,struct",
    [
        ("## Timeline: `tracekit.timeline/1`", TimelineDoc),
        ("## CI verdict: `tracekit.gate/1`", VerdictDoc),
        ("## Diff: `tracekit.diff/1`", DiffDoc),
    ],
    ids=["timeline", "verdict", "diff"],
)
def test_report_inputs_doc_matches_the_structs(heading, struct):
    """docs/report-inputs.md's example of each document names exactly the fields its Struct declares."""
    declared: set[str] = set()
    _struct_keys(struct, declared)
    assert _documented(INPUTS, heading) == declared, _documented(INPUTS, heading) ^ declared


# -- the critical-path section, typed ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def critical_summary() -> dict:
    traces = tracekit.load([gpu_trace("pp-sendrecv-128rank-rank0.json.gz"), gpu_trace("pp-sendrecv-128rank-rank1.json.gz")])
    return tracekit.analyze(traces, critical_path=True).to_dict()


def test_a_critical_path_summary_round_trips_exactly(critical_summary, tmp_path):
    cp = critical_summary["critical_path"]
    assert cp["steps"] and cp["steps"][0]["segments"] and cp["whatif"]["answers"]
    doc = read_summary(_write(tmp_path, critical_summary))
    assert doc.critical_path.steps[0].segments[0].kind == cp["steps"][0]["segments"][0]["kind"]
    assert json.dumps(as_dict(doc)) == json.dumps(critical_summary)


CRITICAL_BAD = {
    "steps a string": ({"steps": "abc"}, "$.critical_path.steps"),
    "segment start a string": (
        {"steps": [{"step": 1, "length_us": 1.0, "segments": [{"rank": 0, "start_us": "x", "dur_us": 1.0, "kind": "compute"}]}]},
        "$.critical_path.steps[0].segments[0].start_us",
    ),
    "answers not a list": ({"whatif": {"steps": 1, "answers": {"q": 1}}}, "$.critical_path.whatif.answers"),
}


@pytest.mark.parametrize("case", sorted(CRITICAL_BAD))
def test_a_malformed_critical_path_is_one_line_not_a_report_traceback(tmp_path, case):
    """Before: `report --summary` ended in an AttributeError/ValueError traceback out of the HTML reporter."""
    section, where = CRITICAL_BAD[case]
    p = _write(tmp_path, {**tp_run([10.0, 12.0]), "critical_path": section})
    with pytest.raises(ConfigError) as err:
        read_summary(p, error=ConfigError)
    assert where in str(err.value) and "\n" not in str(err.value)


def test_the_activation_memory_section_is_typed(tmp_path):
    """A real run directory's summary (activation_r0.json + run.json) round-trips exactly; the rows the reports
    show are refused as one line when wrong (before: a TypeError/AttributeError traceback from `report --summary`)."""
    from tests.unit.analyzers.test_memory_run import MANIFEST, analyze_json, run_dir

    (tmp_path / "run").mkdir()
    real = analyze_json(run_dir(tmp_path / "run", MANIFEST))
    assert real["activation_memory"]["layers"]
    doc = read_summary(_write(tmp_path, real))
    assert doc.activation_memory.layers[1].delta_bytes == 4096
    assert json.dumps(as_dict(doc)) == json.dumps(real)
    for section, where in (
        ({"layers": "abc"}, "$.activation_memory.layers"),
        (
            {"layers": [{"rank": 0, "layer": 0, "measured_bytes": "x", "model_bytes": 1}]},
            "$.activation_memory.layers[0].measured_bytes",
        ),
    ):
        with pytest.raises(ConfigError, match=re.escape(where)):
            read_summary(_write(tmp_path, {**tp_run([1.0]), "activation_memory": section}), error=ConfigError)


def test_the_typed_sections_documented_elsewhere_match_their_structs():
    """The summary-schema test skips critical_path and activation_memory (documented in their own words); here
    each Struct field of them is held to its documentation: activation_memory's example block key for key, the
    critical path's fields named in docs/summary-schema.md's `critical_path` bullet or docs/whatif.md."""
    from tracekit.formats.summary import ActivationMemorySection, CriticalPathSection

    text = DOCS.read_text(encoding="utf-8")
    block = text.split('"activation_memory": ', 1)[1].split('\n  "warnings"', 1)[0]
    block = re.sub(r'"model": \{.*?"terms": \[\.\.\.\]\}', '"model": {}', block, flags=re.S)  # free-form
    declared: set[str] = set()
    _struct_keys(ActivationMemorySection, declared)
    assert set(re.findall(r'"([a-z_]+)":', block)) == declared
    cp: set[str] = set()
    _struct_keys(CriticalPathSection, cp)
    prose = text.split("- `critical_path`", 1)[1].split("\n- ", 1)[0] + (DOCS.parent / "whatif.md").read_text("utf-8")
    missing = {k for k in cp if not re.search(rf"\b{k}\b", prose)}
    assert not missing, missing
