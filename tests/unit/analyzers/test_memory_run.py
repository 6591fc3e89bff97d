"""`analyze` on a run directory with activation_r{rank}.json and run.json: the summary's activation_memory
against numbers worked out by hand from Korthikanti et al. Table 2 (TP + SP: sbh/t (34 + 5as/h))."""

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from tracekit.cli import cli
from tracekit.model.activation import ActivationMemoryResult, LayerActivation, StepActivation

TRACE = Path(__file__).resolve().parents[2] / "data" / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz"
S, B, H, A, T = 64, 2, 64, 8, 2
MODEL = S * B * H // T * (34 + 5 * A * S // H)  # bf16, dropout with 1-byte masks: 4096 · 74 = 303104
MANIFEST = {
    "schema": "tracekit.run/1",
    "layout": {"tp": T, "cp": 1, "dp": 1, "sequence_parallel": True},
    "model": {"layers": 2, "seq": S, "hidden": H, "heads": A, "batch": B, "dtype": "bf16", "dropout": 0.1},
}


def result(rank, last_step_bytes):
    def step(i, per_layer):
        layers = tuple(LayerActivation(n, f"layers.{n}", b) for n, b in enumerate(per_layer))
        return StepActivation(i, sum(per_layer), 0, layers, (), ())

    return ActivationMemoryResult(rank, (step(0, [1, 2]), step(1, last_step_bytes)), "none")


def run_dir(tmp_path, manifest):
    shutil.copy(TRACE, tmp_path / "rank0.trace.json.gz")
    (tmp_path / "run.json").write_text(json.dumps(manifest))
    result(0, [MODEL, MODEL + 4096]).save(tmp_path / "activation_r0.json")
    return tmp_path


def analyze_json(path):
    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--format", "json", str(path)])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_activation_memory_from_the_run_directory(tmp_path):
    d = analyze_json(run_dir(tmp_path, MANIFEST))
    assert MODEL == 303104
    mem = d["activation_memory"]
    rows = [(x["rank"], x["layer"], x["measured_bytes"], x["model_bytes"], x["delta_bytes"]) for x in mem["layers"]]
    assert rows == [(0, 0, MODEL, MODEL, 0), (0, 1, MODEL + 4096, MODEL, 4096)]  # the last step's layers
    assert mem["model"]["name"] == "tp+sp" and mem["model"]["config"]["tp"] == T
    assert d["run"]["sources"] == [str(tmp_path / "rank0.trace.json.gz")]  # activation_r0.json is not a trace
    res = CliRunner().invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--width", "200", str(tmp_path)])
    assert "activation memory per layer" in res.output and "measured KiB" in res.output  # units in the header
    assert any(line.count("296.00") == 2 for line in res.output.splitlines())  # 303104 B = 296 KiB, both columns


def test_model_keys_in_the_model_dict_win_and_without_dimensions_a_warning(tmp_path):
    manifest = {"model": {**MANIFEST["model"], "tp": 1, "sp": False}, "layout": MANIFEST["layout"]}
    d = analyze_json(run_dir(tmp_path / "a" if (tmp_path / "a").mkdir() is None else None, manifest))
    assert d["activation_memory"]["layers"][0]["model_bytes"] == S * B * H * (34 + 5 * A * S // H)
    (tmp_path / "b").mkdir()
    d = analyze_json(run_dir(tmp_path / "b", {"layout": {"tp": 2}}))
    assert "activation_memory" not in d
    assert any("activation_r*.json found but run.json has no model" in w for w in d["warnings"])
