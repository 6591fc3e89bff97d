"""ParallelLayout: validation (one-line ConfigErrors), the manifest round trip, the world size, the enums."""

from __future__ import annotations

import ast
import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from tracekit.errors import ConfigError
from tracekit.model.layout import CpKind, Dimension, LayoutError, ParallelLayout

CANONICAL = {"tp": 2, "cp": 2, "dp": 1, "sequence_parallel": True, "cp_kind": "ring", "world_size": 4}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(tp=0), "parallel layout: tp=0 must be >= 1"),
        (dict(cp=-2), "parallel layout: cp=-2 must be >= 1"),
        (dict(dp="2"), "parallel layout: dp='2' is not an integer; give sizes as integers >= 1"),
        (dict(pp=2.0), "parallel layout: pp=2.0 is not an integer; give sizes as integers >= 1"),
        (dict(tp=True), "parallel layout: tp=True is not an integer; give sizes as integers >= 1"),
        (dict(cp_kind="zigzag"), "parallel layout: cp_kind='zigzag' is not one of ring, ulysses"),
        (
            dict(dp=2, ep=4),
            "parallel layout: ep=4 must divide dp x cp = 2 (expert parallelism splits the data- and "
            "context-parallel ranks); change ep or dp",
        ),
        (dict(other=(("tp", 2),)), "parallel layout: tp=2 is not a layout entry; give sizes as integers >= 1"),
        (dict(other=(("mesh", [2, 2]),)), "parallel layout: mesh=[2, 2] is not a layout entry; give sizes as integers >= 1"),
    ],
)
def test_each_bad_combination_is_a_one_line_config_error(kwargs, message):
    with pytest.raises(ConfigError) as err:
        ParallelLayout(**kwargs)
    assert str(err.value) == message and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([2, 2], 'run.json layout: expected a mapping such as {"tp": 2, "dp": 2}, got list'),
        ({"tp": 0}, "run.json layout: tp=0 must be >= 1"),
        ({"tp": "2"}, "run.json layout: tp='2' is not an integer; give sizes as integers >= 1"),
        ({"cp": 2, "cp_kind": "zigzag"}, "run.json layout: cp_kind='zigzag' is not one of ring, ulysses"),
        ({"tp": 2, "sp": 1}, "run.json layout: sp=1 must be true or false"),
        ({"sp": True, "sequence_parallel": False}, "run.json layout: sp and sequence_parallel disagree; keep one of them"),
        (
            {"tp": 2, "dp": 2, "world_size": 8},
            "run.json layout: world_size=8 but the sizes multiply to 4; fix world_size or the sizes",
        ),
        ({"tp": 2, "world_size": 0}, "run.json layout: world_size=0 must be >= 1"),
        ({"tp": 2, "mesh": {"tp": 2}}, "run.json layout: mesh={'tp': 2} is not a layout entry; give sizes as integers >= 1"),
        ({1: 2}, "run.json layout: key 1 is not a string"),
        (
            {"dp": 2, "ep": 4},
            "run.json layout: ep=4 must divide dp x cp = 2 (expert parallelism splits the data- and "
            "context-parallel ranks); change ep or dp",
        ),
    ],
)
def test_a_malformed_manifest_layout_names_where_it_came_from(data, message):
    with pytest.raises(LayoutError) as err:
        ParallelLayout.from_dict(data, where="run.json layout")
    assert str(err.value) == message and "\n" not in str(err.value)
    assert isinstance(err.value, ConfigError) and err.value.exit_code == 2


def test_the_collectors_form_is_what_layout_to_dict_always_wrote():
    lay = ParallelLayout(tp=2, cp=2, sequence_parallel=True)
    assert lay.to_dict() == CANONICAL and list(lay) == list(CANONICAL)
    assert ParallelLayout().to_dict() == {
        "tp": 1,
        "cp": 1,
        "dp": 1,
        "sequence_parallel": False,
        "cp_kind": "ring",
        "world_size": 1,
    }
    # pp and ep appear only when they are not 1, after dp
    assert list(ParallelLayout(tp=2, dp=2, pp=2, ep=2)) == [
        "tp",
        "cp",
        "dp",
        "pp",
        "ep",
        "sequence_parallel",
        "cp_kind",
        "world_size",
    ]


@pytest.mark.parametrize(
    "recorded",
    [
        CANONICAL,
        {"tp": 2, "dp": 1},
        {"tp": 2, "cp": 1, "dp": 1, "sequence_parallel": True},
        {"dp": 2, "tp": 4, "sp": True},
        {"cp": 4, "cp_kind": "ulysses", "world_size": 4},
        {"tp": 2, "pp": 2, "dp": 2, "ep": 2, "world_size": 8},
        {"dp_shard": 4, "tp": 2, "world_size": 8, "note": "fsdp", "zero_stage": 0},
        {},
    ],
)
def test_manifest_round_trip_keeps_keys_order_and_values(recorded):
    lay = ParallelLayout.from_dict(recorded)
    assert lay.to_dict() == recorded and list(lay.to_dict()) == list(recorded)
    assert json.dumps(lay.to_dict()) == json.dumps(recorded)
    again = ParallelLayout.from_dict(json.loads(json.dumps(lay.to_dict())))
    assert again == lay and hash(again) == hash(lay)
    assert dict(lay) == recorded  # as a mapping it is its manifest form (what summaries and the gate see)


def test_a_mapping_that_reads_as_the_manifest_and_answers_as_a_layout():
    lay = ParallelLayout.from_dict({"tp": 4, "dp": 2, "sp": True})
    assert lay.tp == 4 and lay.dp == 2 and lay.cp == 1 and lay.sequence_parallel and lay.cp_kind is CpKind.RING
    assert "cp" not in lay and lay.get("cp") is None and lay["sp"] is True and len(lay) == 3
    with pytest.raises(KeyError):
        lay["world_size"]
    assert ParallelLayout.unknown() == {} and not ParallelLayout.unknown() and ParallelLayout.unknown().tp == 1
    assert ParallelLayout(tp=2) == ParallelLayout(tp=2) != ParallelLayout(tp=2, sequence_parallel=True)
    assert ParallelLayout(tp=2) != {"tp": 2}  # equality is that of the manifest form: these record different keys


@pytest.mark.parametrize(
    ("sizes", "world"),
    [
        (dict(), 1),
        (dict(tp=8), 8),
        (dict(tp=2, cp=2), 4),
        (dict(tp=2, cp=2, dp=2), 8),
        (dict(tp=2, cp=3, dp=5, pp=7), 210),
        (dict(tp=2, dp=4, ep=4), 8),
        (dict(cp=2, dp=2, ep=4), 4),  # ep is carved out of dp x cp: it does not multiply
    ],
)
def test_world_size_is_the_product_of_the_mesh_sizes(sizes, world):
    lay = ParallelLayout(**sizes)
    assert lay.world_size == world
    assert lay.world_size == lay.tp * lay.cp * lay.dp * lay.pp
    assert ParallelLayout.from_dict({**sizes, "world_size": world}).world_size == world


def test_sizes_of_axes_tracekit_does_not_name_count_in_the_world_size():
    lay = ParallelLayout.from_dict({"dp_shard": 4, "tp": 2, "zero_stage": 0, "note": "x"})
    assert lay.world_size == 8 and lay.other == (("dp_shard", 4), ("zero_stage", 0), ("note", "x"))


def test_dimensions_of_the_axes_and_the_shard_rules():
    assert [ParallelLayout().dimension(a) for a in ("tp", "cp", "dp", "pp", "ep", "fsdp")] == [
        Dimension.TP,
        Dimension.CP,
        Dimension.DP,
        Dimension.PP,
        Dimension.EP,
        Dimension.UNKNOWN,
    ]
    uly = ParallelLayout(tp=2, cp=4, sequence_parallel=True, cp_kind="ulysses")
    assert uly.dimension("tp") is Dimension.SP and uly.dimension("cp") is Dimension.ULYSSES
    assert uly.head_shards == 8 and uly.sequence_shards == 8
    ring = ParallelLayout(tp=2, cp=4)
    assert ring.head_shards == 2 and ring.sequence_shards == 4
    assert uly.size(Dimension.SP) == 2 and uly.size("ulysses") == 4 and uly.size(Dimension.DP) == 1
    assert uly.size("unknown") == 1 and uly.sizes() == {"tp": 2, "cp": 4, "dp": 1, "pp": 1, "ep": 1}


@pytest.mark.parametrize(
    ("layout", "shape", "message"),
    [
        (ParallelLayout(), dict(seq=64, hidden=100, heads=8), "x: hidden=100 is not a multiple of heads=8"),
        (
            ParallelLayout(tp=3),
            dict(seq=64, hidden=96, heads=8),
            "x: heads=8 must divide by tp (and cp for Ulysses); choose a head count that shards evenly",
        ),
        (
            ParallelLayout(tp=2, cp=8, cp_kind="ulysses"),
            dict(seq=64, hidden=64, heads=8),
            "x: heads=8 must divide by tp (and cp for Ulysses); choose a head count that shards evenly",
        ),
        (ParallelLayout(tp=4, sequence_parallel=True), dict(seq=30, hidden=64, heads=8), "x: seq=30 must divide by cp * tp (SP)"),
        (ParallelLayout(cp=4), dict(seq=30, hidden=64, heads=8), "x: seq=30 must divide by cp"),
    ],
)
def test_check_shape(layout, shape, message):
    with pytest.raises(LayoutError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        layout.check_shape(**shape, where="x")
    ParallelLayout(tp=2, cp=2, sequence_parallel=True).check_shape(seq=64, hidden=64, heads=8)


def test_enums_are_their_strings_in_json_f_strings_and_comparisons():
    assert Dimension.SP == "sp" and f"tracekit:{Dimension.SP}" == "tracekit:sp" and str(CpKind.ULYSSES) == "ulysses"
    assert f"{Dimension.TP:>4}|" == "  tp|"
    assert json.dumps({"d": Dimension.ULYSSES, "k": CpKind.RING}) == '{"d": "ulysses", "k": "ring"}'
    assert [d.value for d in Dimension] == ["tp", "sp", "cp", "ulysses", "dp", "pp", "ep", "unknown"]
    assert Dimension.parse("dp") is Dimension.DP and Dimension.parse("tp_cp") is Dimension.UNKNOWN
    assert CpKind("ring").dimension is Dimension.CP and CpKind.ULYSSES.dimension is Dimension.ULYSSES
    assert ParallelLayout(cp_kind="ulysses").cp_kind is CpKind.ULYSSES


def test_the_model_module_imports_no_torch_collectors_analyzers_or_gate():
    source = Path(__file__).resolve().parents[3] / "tracekit" / "model" / "layout.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported <= {"__future__", "math", "operator", "collections.abc", "dataclasses", "enum", "..errors"}


def test_a_layout_survives_pickling_and_replace():
    for lay in (
        ParallelLayout(tp=2, cp=2, cp_kind="ulysses"),
        ParallelLayout.from_dict({"tp": 2, "note": "x"}),
        ParallelLayout.unknown(),
    ):
        back = pickle.loads(pickle.dumps(lay))
        assert back == lay and back.recorded == lay.recorded and back.cp_kind is lay.cp_kind
    assert dataclasses.replace(ParallelLayout(tp=2), tp=4).world_size == 4
    with pytest.raises(LayoutError):
        dataclasses.replace(ParallelLayout(tp=2), tp=0)
