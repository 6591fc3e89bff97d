"""What a user reads first (issue 32): `tracekit --help` in the order of the work with examples that exist,
`check`'s CI files written even when it cannot gate, `step -1` as "outside steps", the overlapping shares explained,
and `run`'s --batch following --microbatches × dp (a real 2-process pipeline run)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers.summaries import tp_run
from tracekit.cli import COMMANDS, EXAMPLES, cli
from tracekit.reports.terminal import render_text

ROOT = Path(__file__).resolve().parents[3]


def test_help_lists_the_commands_in_the_order_of_the_work_with_examples():
    out = CliRunner().invoke(cli, ["--help"]).output
    heads = [line for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert heads[-5:] == ["Record a run:", "Inspect traces:", "Analyze:", "Report:", "Gate in CI:"][-5:], heads
    order = [n for n in ("run", "info", "analyze", "report", "check") if f"\n  {n} " in out]
    assert order == ["run", "info", "analyze", "report", "check"]
    assert [out.index(f"\n  {n} ") for n in order] == sorted(out.index(f"\n  {n} ") for n in order)
    for name, _ in COMMANDS:
        examples = EXAMPLES[name]
        assert 1 <= len(examples) <= 3 and all(f"$ {ex}" in out for ex in examples), name
    assert sum(len(v) >= 2 for v in EXAMPLES.values()) >= len(COMMANDS) - 1  # two or three, baseline has one flag


@pytest.mark.parametrize("name", [n for n, _ in COMMANDS])
def test_every_example_uses_options_the_command_has(name):
    """Each example's options parse: the command (and subcommand) exist and every --flag is one of theirs."""
    cmd = cli.get_command(None, name)
    for ex in EXAMPLES[name]:
        argv = shlex.split(ex)
        assert argv[:2] == ["tracekit", name], ex
        target, rest = cmd, argv[2:]
        if hasattr(target, "commands"):
            target = target.commands[rest[0]]
            rest = rest[1:]
        known = {o for p in target.params for o in (*p.opts, *p.secondary_opts)}
        for tok in rest:
            if tok.startswith("-"):
                assert tok.split("=")[0] in known, (ex, tok)
        assert "Examples:" in CliRunner().invoke(cli, [name, "--help"]).output


def test_check_that_cannot_gate_still_writes_its_ci_files(tmp_path):
    base, run4 = tmp_path / "base.json", tmp_path / "tp4.json"
    base.write_text(json.dumps(tp_run([100.0, 101.0])))
    run4.write_text(json.dumps(tp_run([100.0], ranks=4)))
    junit, md = tmp_path / "gate.xml", tmp_path / "gate.md"
    r = CliRunner().invoke(cli, ["check", str(run4), "--baseline", str(base), "--junit", str(junit), "--markdown", str(md)])
    assert r.exit_code == 3
    suite = ET.parse(junit).getroot()
    assert suite.get("errors") == "1" and suite.get("failures") == "0"
    (error,) = suite.iter("error")
    assert "world size differs (baseline 2, this run 4)" in error.get("message")
    assert "could not gate (exit 3)" in md.read_text() and "world size differs" in md.read_text()
    r = CliRunner().invoke(cli, ["check", str(run4), "--budget", "nonsense", "--junit", str(junit)])
    assert r.exit_code == 2 and "exit 2" in ET.parse(junit).getroot().find(".//error").text


def test_outside_steps_and_overlapping_shares_are_said_in_words():
    s = tp_run([100.0, 101.0])
    s["collectives"][0]["step"] = -1
    s["ranks"][0]["kernel_breakdown"] = [
        {"name": "k", "short_name": "k", "class": "gemm", "count": 1, "total_us": 10.0, "share": 0.9}
    ]
    s["ranks"][0]["kernel_classes"] = [
        {"class": "gemm", "count": 1, "total_us": 9.0, "share": 0.9},
        {"class": "comm:nccl", "count": 1, "total_us": 8.0, "share": 0.8},
    ]
    s["ranks"][0]["busy_partition"] = {"busy_us": 10.0, "parts": []}
    text = render_text(s, width=200, top=50)
    assert "outside steps" in text and "│ -1 " not in text
    assert "the shares add up to 170.0 %" in text
    assert "exposed is a share of step time" in text and "need not add up to 100 %" in text


@pytest.mark.slow
def test_run_pp_with_microbatches_takes_its_batch_from_them(tmp_path):
    """The command of the issue, for real (2 gloo processes, tiny shapes): --batch follows --microbatches × dp."""
    out = tmp_path / "pp"
    args = ["run", "--workload", "pp", "--pp", "2", "--microbatches", "4", "--out", str(out)]
    args += ["--layers", "2", "--seq", "16", "--hidden", "16", "--heads", "2", "--steps", "1"]
    r = subprocess.run(
        [sys.executable, "-m", "tracekit", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "pp2 x 4 microbatches" in r.stdout
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["model"]["batch"] == 4 and manifest["layout"]["pp"] == 2
    assert "profiler overhead:" in r.stdout and "per recorded step" in r.stdout
