"""The five former layout types now read ParallelLayout and give the numbers they gave before: the collectors'
mesh, the workload config, the memory model, RunMetadata (loader), the dimension rules and the gate's run
identity. Expected values were recorded from main before the change (tests/data/layout: the memory model's
JSON for the README command) or worked out by hand from the documented rank order."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.analyzers.comm.dimensions import DimensionMap
from tracekit.analyzers.memory.activation_model import MemoryConfig, activation_model
from tracekit.analyzers.memory.activation_run import compare_files, config_from_manifest
from tracekit.cli import cli
from tracekit.collectors.layout import coords, group_ranks
from tracekit.collectors.workloads.config import WorkloadConfig
from tracekit.errors import ConfigError, SummaryFormatError
from tracekit.gate.metrics import RunMetrics as Summary
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.activation import ActivationFiles
from tracekit.model.layout import CpKind, ParallelLayout
from tracekit.model.traceset import RunMetadata

DATA = Path(__file__).resolve().parents[2] / "data"
TRACE = DATA / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz"


# -- collectors: the (dp, cp, tp) mesh, tp innermost ----------------------------------------------------------
def test_mesh_groups_and_coordinates_of_a_three_d_layout():
    lay = ParallelLayout(tp=2, cp=2, dp=2)
    assert group_ranks(lay, "tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert group_ranks(lay, "cp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert group_ranks(lay, "dp") == [[0, 2, 4, 6], [1, 3, 5, 7]]  # dp x cp: every rank with the same weights
    assert [coords(lay, r) for r in range(8)] == [(d, c, t) for d in range(2) for c in range(2) for t in range(2)]
    with pytest.raises(ConfigError, match="unknown axis 'pp'"):
        group_ranks(lay, "pp")


# -- the workload config ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("config", "manifest_layout", "groups", "dims"),
    [
        (
            dict(workload="tp-sp+cp-ring", tp=2, cp=2),
            {"tp": 2, "cp": 2, "dp": 1, "sequence_parallel": True, "cp_kind": "ring", "world_size": 4},
            {"tp": [[0, 1], [2, 3]], "cp": [[0, 2], [1, 3]], "dp": [[0, 2], [1, 3]]},
            ["sp", "cp", "dp"],
        ),
        (
            dict(workload="tp+dp"),
            {"tp": 2, "cp": 1, "dp": 2, "sequence_parallel": False, "cp_kind": "ring", "world_size": 4},
            {"tp": [[0, 1], [2, 3]], "cp": [[0], [1], [2], [3]], "dp": [[0, 2], [1, 3]]},
            ["tp", "cp", "dp"],
        ),
        (
            dict(workload="ulysses", cp=4),
            {"tp": 1, "cp": 4, "dp": 1, "sequence_parallel": False, "cp_kind": "ulysses", "world_size": 4},
            {"tp": [[0], [1], [2], [3]], "cp": [[0, 1, 2, 3]], "dp": [[0, 1, 2, 3]]},
            ["tp", "ulysses", "dp"],
        ),
    ],
)
def test_workload_layouts_are_the_ones_recorded_before(config, manifest_layout, groups, dims):
    lay = WorkloadConfig(**config).validate()
    assert lay.to_dict() == manifest_layout and list(lay.to_dict()) == list(manifest_layout)
    assert {a: group_ranks(lay, a) for a in ("tp", "cp", "dp")} == groups
    assert [lay.dimension(a) for a in ("tp", "cp", "dp")] == dims


def test_workload_model_dims_are_unchanged():
    dims = WorkloadConfig(workload="tp-sp+cp-ring", tp=2, cp=2).model_dims()
    assert dims == {
        "layers": 2,
        "seq": 64,
        "hidden": 64,
        "heads": 8,
        "batch": 2,
        "global_batch": 2,
        "dtype": "fp32",
        "dropout": 0.1,
        "ffn_hidden": 256,
        "tp": 2,
        "cp": 2,
        "sp": True,
        "cp_kind": "ring",
        "mask_bytes": 1,
        "layernorm_stat_bytes": 4,
    }
    assert type(dims["cp_kind"]) is str  # plain JSON in run.json


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (dict(workload="ulysses", cp=3, heads=8), "workload ulysses: --heads 8 must divide by tp x cp"),
        (dict(workload="tp-sp", tp=3), "workload tp-sp: --heads 8 must divide by tp"),
        (dict(workload="dp", dp=3), "workload dp: --batch 2 must divide by --dp 3"),
        (dict(workload="cp-ring", cp=3), "workload cp-ring: --seq 64 must divide by 2 x --cp 3"),
        (
            dict(workload="tp-sp", tp=2, seq=34),
            "workload tp-sp: --seq 34 / cp must divide by tp x chunks (2 x 2) for sequence parallel",
        ),
        (dict(workload="tp", chunks=3), "workload tp: --seq 64 / cp must divide by chunks"),
        (dict(workload="tp", tp=-1), "workload tp: degrees, layers, steps >= 1"),
        (dict(workload="tp", tp=0), "workload tp: degrees, layers, steps >= 1"),  # was a ZeroDivisionError
        (dict(workload="cp-ring", cp=0), "workload cp-ring: degrees, layers, steps >= 1"),  # was a ZeroDivisionError
        (dict(workload="tp", layers=0), "workload tp: degrees, layers, steps >= 1"),
    ],
)
def test_workload_errors_say_what_they_said(config, message):
    with pytest.raises(ConfigError) as err:
        WorkloadConfig(**config).validate()
    assert str(err.value) == message


# -- the memory model ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "golden"),
    [
        ("--seq 2048 --batch 1 --hidden 4096 --heads 32 --tp 8 --sp", "memory-model-readme-tp8-sp.json"),
        (
            "--seq 2048 --batch 1 --hidden 4096 --heads 32 --tp 4 --cp 2 --cp-kind ulysses --sp --tensors --vocab 51200",
            "memory-model-tp4-ulysses2-sp-tensors-vocab.json",
        ),
    ],
)
def test_memory_model_cli_json_is_what_main_printed(args, golden):
    res = CliRunner().invoke(cli, ["memory", "model", *args.split(), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == json.loads((DATA / "layout" / golden).read_text())
    if golden.startswith("memory-model-readme"):
        assert json.loads(res.output)["model"]["total_bytes"] == 119_537_664  # sbh/t (34 + 5as/h), README


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(tp=0), "activation model: tp=0 must be >= 1"),
        (dict(cp=-2), "activation model: cp=-2 must be >= 1"),
        (dict(cp_kind="zigzag"), "activation model: cp_kind='zigzag' is not one of ring, ulysses"),
        (dict(heads=6), "activation model: hidden=64 is not a multiple of heads=6"),
        (dict(tp=3), "activation model: heads=8 must divide by tp (and cp for Ulysses); choose a head count that shards evenly"),
        (dict(seq=30, tp=4, sp=True), "activation model: seq=30 must divide by cp * tp (SP)"),
        (dict(seq=0), "activation model: seq=0 must be >= 1"),
        (dict(recompute="some"), "activation model: recompute='some' is not one of none, selective, full"),
    ],
)
def test_memory_config_errors_say_what_they_said(kwargs, message):
    with pytest.raises(ConfigError) as err:
        MemoryConfig(**(dict(seq=64, batch=1, hidden=64, heads=8) | kwargs))
    assert str(err.value) == message


def test_memory_config_from_a_layout_is_the_same_model():
    by_fields = MemoryConfig(2048, 1, 4096, 32, tp=8, sp=True)
    by_layout = MemoryConfig.from_layout(ParallelLayout(tp=8, dp=4, sequence_parallel=True), 2048, 1, 4096, 32)
    assert by_layout == by_fields and by_layout.layout.sequence_shards == 8
    assert activation_model(by_layout).to_dict() == activation_model(by_fields).to_dict()
    assert by_fields.to_dict()["cp_kind"] == "ring" and "layout" not in by_fields.to_dict()
    assert MemoryConfig(64, 1, 64, 8, cp=2, cp_kind="ulysses").cp_kind is CpKind.ULYSSES


def test_config_from_manifest_is_unchanged():
    manifest = {
        "layout": {"tp": 2, "cp": 1, "dp": 1, "sequence_parallel": True},
        "model": {"layers": 2, "seq": 64, "hidden": 64, "heads": 8, "batch": 2, "dtype": "bf16", "dropout": 0.1},
    }
    assert config_from_manifest(manifest).to_dict() == {
        "seq": 64,
        "batch": 2,
        "hidden": 64,
        "heads": 8,
        "tp": 2,
        "cp": 1,
        "sp": True,
        "cp_kind": "ring",
        "recompute": "none",
        "attention": "standard",
        "bytes_per_element": 2,
        "mask_bytes": 1,
        "dropout": True,
        "layernorm_stat_bytes": 0,
    }
    # keys of the model dict win over the layout's
    manifest = {
        "layout": {"tp": 2, "cp": 2, "dp": 1, "sequence_parallel": True, "cp_kind": "ulysses", "world_size": 4},
        "model": {
            "seq": 64,
            "hidden": 64,
            "heads": 8,
            "batch": 2,
            "dtype": "torch.float32",
            "dropout": 0,
            "tp": 2,
            "sp": False,
            "layernorm_stat_bytes": 4,
        },
    }
    assert config_from_manifest(manifest).to_dict() == {
        "seq": 64,
        "batch": 2,
        "hidden": 64,
        "heads": 8,
        "tp": 2,
        "cp": 2,
        "sp": False,
        "cp_kind": "ulysses",
        "recompute": "none",
        "attention": "standard",
        "bytes_per_element": 4,
        "mask_bytes": 1,
        "dropout": False,
        "layernorm_stat_bytes": 4,
    }


def test_a_malformed_layout_leaves_the_activation_comparison_out_with_a_warning():
    manifest = {"layout": {"tp": "two"}, "model": {"seq": 64, "hidden": 64, "heads": 8, "batch": 2}}
    comparison, warnings = compare_files(ActivationFiles(found=("activation_r0.json",)), manifest)
    assert comparison is None and warnings == (
        "activation memory: run.json model does not configure the model (run.json layout: tp='two' is not an "
        "integer; give sizes as integers >= 1)",
    )


# -- RunMetadata and the loader -----------------------------------------------------------------------------
def _run_dir(tmp_path: Path, layout) -> Path:
    shutil.copy(TRACE, tmp_path / "rank0.trace.json.gz")
    (tmp_path / "run.json").write_text(json.dumps({"schema": "tracekit.run/1", "layout": layout}))
    return tmp_path


@pytest.mark.parametrize(
    "layout",
    [
        {"tp": 2, "cp": 2, "dp": 1, "sequence_parallel": True, "cp_kind": "ring", "world_size": 4},
        {"tp": 2},
        {"dp_shard": 4, "tp": 2},
    ],
)
def test_the_loader_builds_the_layout_run_json_records(tmp_path, layout):
    traces = load(str(_run_dir(tmp_path, layout)), options=LoadOptions(cache=False), executor="serial")
    md = traces.metadata
    assert isinstance(md.layout, ParallelLayout) and md.layout.to_dict() == layout
    assert md.to_dict()["layout"] == layout and not [w for w in md.warnings if "layout" in w]
    assert md.layout.tp == 2
    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--format", "json", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["run"]["layout"] == layout  # the summary keeps what run.json recorded


@pytest.mark.parametrize(
    ("layout", "warning"),
    [
        ({"tp": 0}, "run.json layout: tp=0 must be >= 1; the run's layout is treated as unknown"),
        (
            "tp=2",
            'run.json layout: expected a mapping such as {"tp": 2, "dp": 2}, got str; the run\'s layout is treated as unknown',
        ),
        (
            {"tp": 2, "world_size": 3},
            "run.json layout: world_size=3 but the sizes multiply to 2; fix world_size or the "
            "sizes; the run's layout is treated as unknown",
        ),
    ],
)
def test_a_malformed_layout_in_run_json_is_a_warning(tmp_path, layout, warning):
    path = str(_run_dir(tmp_path, layout))
    md = load(path, options=LoadOptions(cache=False), executor="serial").metadata
    assert md.layout == {} and warning in md.warnings
    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--format", "json", path])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["run"]["layout"] == {} and warning in doc["warnings"]


def test_run_metadata_takes_a_plain_mapping_and_defaults_to_unknown():
    assert RunMetadata(world_size=4, layout={"tp": 2, "dp": 2}).layout.world_size == 4
    assert RunMetadata(world_size=1).layout == {} and RunMetadata(world_size=1).to_dict()["layout"] == {}
    with pytest.raises(ConfigError, match="^RunMetadata.layout: tp=0 must be >= 1$"):
        RunMetadata(world_size=1, layout={"tp": 0})


# -- the dimension rules ------------------------------------------------------------------------------------
def test_dimension_names_are_unchanged():
    descs = [
        "tracekit:sp",
        "tracekit:ulysses",
        "TENSOR_AND_CONTEXT_PARALLEL_GROUP",
        "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP",
        "TENSOR_AND_DATA_PARALLEL_GROUP",
        "TENSOR_AND_EXPERT_PARALLEL_GROUP",
        "TENSOR_MODEL_PARALLEL_GROUP",
        "HIERARCHICAL_CONTEXT_PARALLEL_GROUP",
        "CONTEXT_PARALLEL_GROUP",
        "DATA_PARALLEL_GROUP_WITH_CP",
        "INTRA_PARTIAL_DATA_PARALLEL_GROUP",
        "PIPELINE_MODEL_PARALLEL_GROUP",
        "EMBEDDING_GROUP",
        "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP",
        "EXPERT_TENSOR_PARALLEL_GROUP",
        "EXPERT_MODEL_PARALLEL_GROUP",
        "EXPERT_DATA_PARALLEL_GROUP",
        "INTER_EXPERT_DATA_PARALLEL_GROUP",
        "MODEL_PARALLEL_GROUP",
        "mesh_dp_shard",
        "default_pg",
        "custom",
    ]
    dims = DimensionMap(world_size=8)
    got = [dims.dimension("7", d, ()) for d in descs]
    assert got == [
        "sp",
        "ulysses",
        "tp_cp",
        "tp_dp_cp",
        "tp_dp",
        "tp_ep",
        "tp",
        "cp",
        "cp",
        "dp_cp",
        "dp",
        "pp",
        "pp",
        "tp_ep",
        "etp",
        "ep",
        "edp",
        "edp",
        "mp",
        "dp_shard",
        "world",
        "unknown",
    ]
    assert all(type(d) is str for d in got) and dims.dimension("9", "", range(8)) == "world"


# -- the gate's run identity --------------------------------------------------------------------------------
def _summary(layout) -> Summary:
    run = {"world_size": 4, "workload": "tp-sp", "device_type": "cpu", **({} if layout is None else {"layout": layout})}
    return Summary({"schema": "tracekit.summary/1", "ranks": [], "run": run}, source="base.json")


def test_gate_identity_is_unchanged():
    canonical = {"tp": 2, "cp": 2, "dp": 1, "sequence_parallel": True, "cp_kind": "ring", "world_size": 4}
    assert _summary(canonical).identity()["layout"] == {
        "cp": 2,
        "cp_kind": "ring",
        "sequence_parallel": True,
        "tp": 2,
        "world_size": 4,
    }
    assert _summary({"tp": 2, "dp": 1, "dp_shard": 1, "note": "x"}).identity()["layout"] == {"note": "x", "tp": 2}
    assert _summary(None).identity()["layout"] == {}


def test_a_malformed_layout_in_a_summary_is_a_one_line_error():
    with pytest.raises(SummaryFormatError) as err:
        _summary({"tp": -1}).identity()
    assert str(err.value) == "base.json: run.layout: tp=-1 must be >= 1"
