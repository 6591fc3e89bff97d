"""`tracekit analyze --format table` shows the JSON summary's numbers: every cell of the terminal tables is
parsed back to a number and compared with the summary value it stands for (within the display rounding)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers.report_fixtures import make_summary
from tracekit.cli import cli
from tracekit.reports.terminal import render_text

TRACE = str(Path(__file__).resolve().parents[1] / "data" / "kineto-gpu" / "allreduce-broadcast-2rank-rank0.json.gz")
UNITS = {"µs": 1.0, "ms": 1e3, "s": 1e6, "%": 0.01, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "GB/s": 1.0}
NUM = re.compile(r"^(-?[\d.]+)(?: (µs|ms|s|%|B|KiB|MiB|GiB|GB/s))?$")


def parse(text: str):
    """A displayed number -> (value in the summary's unit, half a unit of its last digit); None for '—'."""
    if text == "—":
        return None
    m = NUM.match(text)
    assert m, f"not a number: {text!r}"
    digits, unit = m.groups()
    scale = UNITS[unit] if unit else 1.0
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return float(digits) * scale, 0.5 * 10.0 ** -decimals * scale * 1.000001


def tables(text: str) -> dict[str, list[dict]]:
    """Rich tables by title -> rows as {header: cell}; the title is the line before the top border."""
    out, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("┏"):
            title, headers, rows = lines[i - 1].strip(), None, []
            for row in lines[i + 1:]:
                if row.startswith("└"):
                    break
                cells = [c.strip() for c in row.strip("┃│").split("┃" if row.startswith("┃") else "│")]
                if row.startswith("┃"):
                    headers = cells
                elif row.startswith("│"):
                    rows.append(dict(zip(headers, cells)))
            out[title] = rows
    return out


def check(cell: str, want) -> None:
    got = parse(cell)
    if want is None:
        assert got is None, cell
    else:
        assert got is not None and abs(got[0] - want) <= got[1], (cell, want)


def test_analyze_table_equals_the_json_summary(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--format", "json", TRACE])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    out = tmp_path / "t.txt"
    res = runner.invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--width", "260", "--out", str(out),
                              TRACE])
    assert res.exit_code == 0, res.output
    t = tables(out.read_text())
    (row,) = t["per rank (totals over steps)"]
    tot = d["ranks"][0]["totals"]
    for key in ("wall_us", "compute_us", "comm_us", "hidden_comm_us", "exposed_comm_us", "idle_us", "memcpy_us",
                "multi_stream_comm_us", "overlap_ratio"):
        check(row[key.removesuffix("_us").replace("_", " ")], tot[key])
    dims = t["by dimension and op (summed over ranks)"]
    assert [(r["dimension"], r["op"]) for r in dims] == [(x["dimension"], x["op"]) for x in d["by_dimension"]]
    for r, x in zip(dims, d["by_dimension"]):
        assert int(r["count"]) == x["count"]
        for key in ("bytes", "comm_us", "hidden_comm_us", "exposed_comm_us", "wait_us", "busbw_gbps"):
            check(r[key.removesuffix("_us").replace("_", " ")], x[key])
    top = t["top 10 exposed collectives"]
    want = sorted(d["collectives"], key=lambda c: -c["exposed_us"])[:10]
    assert len(top) == 10
    for r, c in zip(top, want):
        check(r["exposed"], c["exposed_us"])
        check(r["dur"], c["dur_us"])
        assert int(r["step"]) == c["step"]


def test_every_section_of_a_hand_built_summary():
    s = make_summary(n_ranks=3, n_steps=2, per_step=4, hostile=True)
    s["ranks"][1]["wait_us"] = 123.5
    t = tables(render_text(s, width=260))
    for r, x in zip(t["per rank (totals over steps)"], s["ranks"]):
        check(r["exposed comm"], x["totals"]["exposed_comm_us"])
        check(r["wait"], x.get("wait_us"))
    for r, x in zip(t["stragglers (who arrives last)"], s["stragglers"]):
        check(r["total caused wait"], x["total_caused_wait_us"])
        check(r["mean lateness"], x["mean_lateness_us"])
    for r, x in zip(t["clock offsets (against the lowest rank)"], s["clock_offsets"]):
        assert int(r["rank"]) == x["rank"]
        check(r["offset"], x["offset_us"])
        check(r["spread"], x["spread_us"])
    mem = t["activation memory per layer: measured vs model"]
    assert len(mem) == 2
    for r, x in zip(mem, s["activation_memory"]["layers"]):
        check(r["measured bytes"], x["measured_bytes"])
        check(r["model bytes"], x["model_bytes"])
    assert len(t["unrecognised kernels on communication streams (a comm rule may be missing)"]) == 2


def test_parser_rejects_a_wrong_number():
    with pytest.raises(AssertionError):
        check("1.234 ms", 1235.0)
    check("1.234 ms", 1234.4)
