"""Every command on Nsight exports, as on Kineto traces: each public sample (three schema generations) and a
generated 2-rank run with NCCL payloads exit 0 through the CLI, and the Python API reads them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.helpers.data import DATA
from tests.helpers.nsys_export import write_nccl_run
from tracekit.cli import cli

SAMPLES = sorted(str(p) for p in (DATA / "nsys").glob("*.sqlite"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("nsys-run")
    write_nccl_run(d, offsets_ns=[0, 2_000_000])
    return str(d)


def _ok(*args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, (args, res.output[-2000:])
    return res.output


@pytest.mark.parametrize("source", [*SAMPLES, "run"])
def test_every_command_exits_0(source, run_dir, tmp_path):
    path = run_dir if source == "run" else source
    common = ("--no-cache", "--executor", "serial")
    _ok("info", path, *common)
    summary = json.loads(_ok("analyze", path, "--format", "json", *common))
    assert summary["ranks"] and summary["schema"] == "tracekit.summary/1"
    _ok("report", path, "-o", tmp_path / "r.html", *common)
    _ok("annotate", path, "-o", tmp_path / "a.json.gz", *common)
    whatif = _ok("whatif", path, *common)
    if source == "run":  # rank 1 arrives 200 µs late at each of the 3 all-reduces: the path runs through it
        (path_line,) = [line for line in whatif.splitlines() if line.startswith("critical path:")]
        assert "on rank 1" in path_line and "on rank 0" not in path_line
    _ok("baseline", path, "-o", tmp_path / "b.json", *common)
    _ok("check", path, "--baseline", tmp_path / "b.json", *common)
    _ok("diff", path, tmp_path / "b.json", *common)


def test_window_takes_an_nvtx_range_name():
    saxpy = next(s for s in SAMPLES if "saxpy" in s)
    info = json.loads(_ok("info", saxpy, "--format", "json", "--window", "saxpy", "--no-cache"))
    assert info["ranks"][0]["steps"] == [0, 1, 2, 3, 4]
    assert ["MPI_Send", 10] in info["ranks"][0]["window_candidates"]


def test_python_api_reads_a_run(run_dir):
    import tracekit

    analysis = tracekit.analyze(tracekit.load(run_dir, options=tracekit.LoadOptions(cache=False), executor="serial"))
    d = analysis.to_dict()
    assert {c["op"] for c in d["collectives"]} == {"all_reduce"}
    assert all(c["wait_us"] is not None for c in d["collectives"])
