"""run.json and activation_r{rank}.json through their typed documents (tracekit.formats.manifest, .activation):
a bad field of a manifest is dropped with a warning naming it and the rest kept; a bad activation file is one
line naming the file and the field; the writers never produce what the readers drop."""

import json
import math
import shutil
from pathlib import Path

import pytest

from tracekit.errors import TraceFormatError
from tracekit.formats.activation import read_activation
from tracekit.formats.manifest import clean, encode, read_manifest
from tracekit.loader import load
from tracekit.model.activation import ActivationMemoryResult, LayerActivation, StepActivation

TRACE = Path(__file__).resolve().parents[2] / "data" / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz"
GOOD = {
    "schema": "tracekit.run/1",
    "world_size": 2,
    "backend": "gloo",
    "layout": {"tp": 2, "cp": 1, "dp": 1, "sequence_parallel": True},
    "process_groups": [
        {"name": "1", "desc": "tracekit:tp", "ranks": [0, 1], "size": 2, "dimension": "tp"},
        {"name": 2, "ranks": [0]},
        {"name": "3", "desc": "", "ranks": [1], "dimension": ""},
    ],
    "group_dimensions": {"1": "tp"},
    "model": {"seq": 64},
    "profiled_ranks": [0, 1],
    "schedule": {"wait": 1, "warmup": 1, "active": 3, "repeat": 1},
    "workload": "tp-sp",
    "custom": {"x": [1]},
}


def test_an_intact_manifest_reads_back_as_written(tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(encode(GOOD))
    doc, warnings = read_manifest(path)
    assert warnings == []
    assert doc == GOOD  # unknown fields ("custom") kept as they are


@pytest.mark.parametrize(
    "field, value",
    [
        ("world_size", -3),
        ("world_size", "two"),
        ("process_groups", ["0,1", "2,3"]),
        ("process_groups", [{"name": "1", "ranks": "0,1"}]),
        ("process_groups", [{"name": "1", "ranks": [-1]}]),
        ("profiled_ranks", [0, "one"]),
        ("schedule", {"wait": -1}),
        ("versions", {"torch": 2}),
        ("workload", 5),
        ("group_dimensions", ["tp"]),
        ("model", [1, 2]),
        ("activation_memory", "yes"),
    ],
)
def test_one_bad_field_is_dropped_with_a_warning_naming_it_and_the_rest_kept(field, value):
    doc, warnings = clean({**GOOD, field: value}, "run.json")
    assert len(warnings) == 1 and f"field {field} =" in warnings[0] and "dropped it" in warnings[0]
    assert field not in doc
    assert {k: v for k, v in doc.items()} == {k: v for k, v in GOOD.items() if k != field}


@pytest.mark.parametrize("schema", ["tracekit.run/2", "tracekit.summary/1", 7])
def test_a_manifest_of_another_schema_is_ignored_with_a_warning(schema):
    doc, warnings = clean({**GOOD, "schema": schema}, "run.json")
    assert doc == {} and len(warnings) == 1 and "ignored" in warnings[0]


def test_a_minor_revision_and_a_missing_schema_are_accepted():
    assert clean({**GOOD, "schema": "tracekit.run/1.4"}, "x")[1] == []
    assert clean({k: v for k, v in GOOD.items() if k != "schema"}, "x")[1] == []


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"world_size": NaN}', "not valid JSON"),
        ("[1, 2]", "not an object"),
        ('{"a": ' + "[" * 2000 + "]" * 2000 + "}", "nested"),
        ('{"layout": ' + "[" * 100 + "]" * 100 + "}", "nested"),
        (b"\xff\xfe{}", "not valid JSON"),
    ],
)
def test_an_unreadable_manifest_is_one_line(tmp_path, text, why):
    path = tmp_path / "run.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(TraceFormatError) as err:
        read_manifest(path)
    assert why in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_writer_refuses_a_field_its_reader_would_drop_and_never_writes_nan():
    with pytest.raises(ValueError, match="world_size"):
        encode({**GOOD, "world_size": 0})
    data = json.loads(encode({**GOOD, "profiler_overhead": {"per_step_ms": math.nan}}))
    assert data["profiler_overhead"] == {"per_step_ms": None}


def test_the_loader_keeps_the_layout_of_a_manifest_with_one_bad_field(tmp_path):
    shutil.copy(TRACE, tmp_path / "rank0.trace.json.gz")
    (tmp_path / "run.json").write_text(json.dumps({**GOOD, "world_size": -3, "process_groups": ["0,1"]}))
    traces = load(tmp_path, executor="serial")
    assert traces.metadata.layout.tp == 2 and traces.metadata.layout.sequence_parallel
    dropped = [w for w in traces.metadata.warnings if "run.json: field" in w]
    assert len(dropped) == 2 and any("world_size" in w for w in dropped) and any("process_groups" in w for w in dropped)
    assert "world_size" not in traces.metadata.manifest and traces.metadata.manifest["workload"] == "tp-sp"


def _result():
    layers = (LayerActivation(0, "layers.0", 1024), LayerActivation(1, "layers.1", 2048))
    return ActivationMemoryResult(1, (StepActivation(3, 3072, 16, layers, (), (), 9000, 4000),), "profiler")


def test_an_activation_file_reads_back_as_saved(tmp_path):
    path = _result().save(tmp_path / "activation_r1.json")
    assert read_activation(path) == _result()


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d.update(rank="abc"), "rank"),
        (lambda d: d.update(steps=[]), "steps"),
        (lambda d: d["steps"][0].update(saved_bytes=-5), "saved_bytes"),
        (lambda d: d["steps"][0]["layers"][0].update(measured_bytes="1k"), "measured_bytes"),
        (lambda d: d["steps"][0].pop("layers"), "layers"),
        (lambda d: d.update(schema="tracekit.activation_memory/2"), "schema"),
    ],
)
def test_a_bad_activation_file_is_one_line_naming_the_field(tmp_path, change, field):
    doc = _result().to_dict()
    change(doc)
    path = tmp_path / "activation_r1.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError) as err:
        read_activation(path)
    text = str(err.value)
    assert str(path) in text and field in text and "\n" not in text
