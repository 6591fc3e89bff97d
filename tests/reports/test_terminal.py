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
    return float(digits) * scale, 0.5 * 10.0**-decimals * scale * 1.000001


HEADER_UNIT = re.compile(r"^(.*?) (µs|ms|s|%|B|KiB|MiB|GiB|GB/s)$")


def tables(text: str) -> dict[str, list[dict]]:
    """Rich tables by title -> rows as {label: cell}; the title is the line before the top border. A numeric
    column names its unit in the header (``wall ms``): the row is keyed by the label and the cell gets the unit
    back (``"1.230 ms"``), so that ``parse`` reads every cell the same way."""
    out, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("┏"):
            title, headers, rows = lines[i - 1].strip(), None, []
            for row in lines[i + 1 :]:
                if row.startswith("└"):
                    break
                cells = [c.strip() for c in row.strip("┃│").split("┃" if row.startswith("┃") else "│")]
                if row.startswith("┃"):
                    headers = [(m.group(1), m.group(2)) if (m := HEADER_UNIT.match(h)) else (h, None) for h in cells]
                elif row.startswith("│"):
                    rows.append({label: (f"{c} {unit}" if unit and c != "—" else c) for (label, unit), c in zip(headers, cells)})
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
    res = runner.invoke(
        cli, ["analyze", "--no-cache", "--executor", "serial", "--width", "260", "--wide", "--out", str(out), TRACE]
    )
    assert res.exit_code == 0, res.output
    t = tables(out.read_text())
    (row,) = t["per rank (totals over complete steps)"]
    tot = d["ranks"][0]["totals"]
    for key, label in (
        ("wall_us", "wall"),
        ("compute_us", "compute"),
        ("comm_us", "comm"),
        ("hidden_comm_us", "hidden"),
        ("exposed_comm_us", "exposed"),
        ("idle_us", "idle"),
        ("memcpy_us", "memcpy"),
        ("multi_stream_comm_us", "comm on 2+ streams"),
        ("overlap_ratio", "overlap"),
    ):
        check(row[label], tot[key])
    dims = t["by dimension and op (summed over ranks)"]
    assert [(r["dimension"], r["op"]) for r in dims] == [(x["dimension"], x["op"]) for x in d["by_dimension"]]
    for r, x in zip(dims, d["by_dimension"]):
        assert int(r["count"]) == x["count"]
        for key, label in (
            ("bytes", "bytes"),
            ("comm_us", "comm"),
            ("hidden_comm_us", "hidden"),
            ("exposed_comm_us", "exposed"),
            ("wait_us", "wait"),
            ("busbw_gbps", "busbw"),
        ):
            check(r[label], x[key] or None if key == "bytes" else x[key])  # an unknown (0) size reads —
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
    t = tables(render_text(s, width=260, wide=True))
    for r, x in zip(t["per rank (totals over complete steps)"], s["ranks"]):
        check(r["exposed"], x["totals"]["exposed_comm_us"])
        check(r["wait"], x.get("wait_us"))
    for r, x in zip(t["stragglers (who arrives last)"], s["stragglers"]):
        check(r["caused wait"], x["total_caused_wait_us"])
        check(r["mean late"], x["mean_lateness_us"])
    for r, x in zip(t["clock offsets (against the lowest rank)"], s["clock_offsets"]):
        assert int(r["rank"]) == x["rank"]
        check(r["offset"], x["offset_us"])
        check(r["±"], x["spread_us"])
    mem = t["activation memory per layer: measured vs model"]
    assert len(mem) == 2
    for r, x in zip(mem, s["activation_memory"]["layers"]):
        check(r["measured"], x["measured_bytes"])
        check(r["modelled"], x["model_bytes"])
    assert len(t["unrecognised kernels on communication streams (a comm rule may be missing)"]) == 2


def test_parser_rejects_a_wrong_number():
    with pytest.raises(AssertionError):
        check("1.234 ms", 1235.0)
    check("1.234 ms", 1234.4)
