"""`tracekit analyze` on real GPU traces fits the width it is given: at 80, 100 and 200 columns and when piped
(stdout not a terminal: $COLUMNS, else 160, never rich's 80) no line is longer than the width, no header wraps,
every row of every table is one line, and each table has exactly as many rows as the summary says.

The DeepSeek-style trace is tests/data's real pp-sendrecv-128rank-rank0 with the kernels of its two
communication streams renamed to DeepEP's, at the length CUPTI reports them (the names of issue #15)."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from click.testing import CliRunner

from tests.helpers.data import real_trace
from tracekit.cli import cli
from tracekit.reports.summary_tables import group_warnings
from tracekit.reports.terminal import cut_name, render_text

DEEPEP = [
    "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int const*, int const*, int*, "
    "void*, void**, int**, int, int, int, int*, bool, int)",
    "void dpsk::ep::internode::dispatch<false, 2, 8, 16, 32, 7168>(int4*, float*, long*, float*, void*, int4 const*, "
    "float const*, long const*, float const*, int*, int*, int*, int*, int const*, int const*, int const*, int, int, int, "
    "int, int, void*, int, int, void**, int, int, int, int)",
    "void dpsk::ep::internode::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
    "void dpsk::ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int, int, bool const*, int*, "
    "int, int, void**, int**, int)",
    "void dpsk::ep::internode::combine<__nv_bfloat16, 2, 8, 16, 32, 7168>(int4*, float*, bool const*, int4 const*, "
    "float const*, int const*, int const*, int const*, int const*, void const*, int, int, int, void*, int, int, void**, "
    "int, int, int, int)",
]
WIDTHS = (80, 100, 200)
FAST = ["--no-cache", "--executor", "serial"]


def deepseek_style(path):
    """Rename the comm-stream kernels; get_dispatch_layout (compute, launched on the comm stream in DeepEP) loses
    its correlation so that it is unrecognised compute there, as in a real DeepEP trace."""
    d = json.loads(gzip.decompress(real_trace("pp-sendrecv-128rank-rank0").read_bytes()))
    i = 0
    for e in d["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("args", {}).get("stream") in (84, 203):
            e["name"] = DEEPEP[i % len(DEEPEP)]
            if "get_dispatch_layout" in e["name"]:
                e["args"]["correlation"] = e["args"]["External id"] = 10**9 + i
            i += 1
    path.write_bytes(gzip.compress(json.dumps(d).encode()))
    return path


@pytest.fixture(
    scope="module",
    params=[
        "deepseek-style",
        "allreduce-broadcast-2rank-rank0",
        "pp-sendrecv-128rank",
        "single-rank-nocomm-nsresolution",
        "rocm-mi250-minitoy",
    ],
)
def case(request, tmp_path_factory):
    """(paths, summary JSON, piped output, COLUMNS=100 output) of one trace (or a pair of ranks)."""
    name = request.param
    if name == "deepseek-style":
        paths = [str(deepseek_style(tmp_path_factory.mktemp("ds") / "deepseek.json.gz"))]
    elif name == "pp-sendrecv-128rank":
        paths = [str(real_trace("pp-sendrecv-128rank-rank0")), str(real_trace("pp-sendrecv-128rank-rank1"))]
    else:
        paths = [str(real_trace(name))]
    runner = CliRunner()
    res = runner.invoke(cli, ["analyze", *FAST, "--format", "json", *paths])
    assert res.exit_code == 0, res.output
    outs = {}
    for key, env in (("piped", {"COLUMNS": None}), (100, {"COLUMNS": "100"})):
        r = runner.invoke(cli, ["analyze", *FAST, *paths], env=env)
        assert r.exit_code == 0, r.output
        outs[key] = r.output
    return {"name": name, "summary": json.loads(res.output), "out": outs}


def tables(text: str) -> list[dict]:
    """Every rich table: its title (the line before it), header lines and body lines."""
    lines, out = text.splitlines(), []
    for i, line in enumerate(lines):
        if line.startswith("┏"):
            end = next(j for j in range(i, len(lines)) if lines[j].startswith("└"))
            sep = next(j for j in range(i, end) if lines[j].startswith("┡"))
            out.append({"title": lines[i - 1], "header": lines[i + 1 : sep], "body": lines[sep + 1 : end]})
    return out


def check_fits(text: str, width: int, summary: dict) -> None:
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= width, max(lines, key=len)
    found = tables(text)
    assert found
    for t in found:
        assert len(t["header"]) == 1, (t["title"], t["header"])  # no header wraps
        for row in t["body"]:
            first = row.strip("│").split("│")[0].strip()
            assert first, (t["title"], row)  # a folded row would go on with an empty first cell
            assert "…" not in "".join(c for c in row.split("│") if re.fullmatch(r"\s*[-\d.]+…?\s*", c))
    rows = {t["title"]: len(t["body"]) for t in found}
    assert rows["per rank (totals over complete steps)"] == len(summary["ranks"])
    if summary["by_dimension"]:
        assert rows["by dimension and op (summed over ranks)"] == len(summary["by_dimension"])
    if summary["collectives"]:
        n = min(10, len(summary["collectives"]))
        assert rows[f"top {n} exposed collectives"] == n


def test_fits_when_piped_and_at_columns_100(case):
    check_fits(case["out"]["piped"], 160, case["summary"])
    check_fits(case["out"][100], 100, case["summary"])


@pytest.mark.parametrize("width", WIDTHS)
def test_fits_at_each_width(case, width):
    check_fits(render_text(case["summary"], width=width), width, case["summary"])


def test_wide_and_full_names_show_everything(case):
    s = case["summary"]
    text = render_text(s, width=100, wide=True, full_names=True)
    for t in tables(text):
        assert len(t["header"]) == 1, t["title"]
    if case["name"] == "deepseek-style":
        assert all(n in render_text(s, width=600, full_names=True) for n in DEEPEP[:2])  # whole signatures
        compact = render_text(s, width=100)
        assert "int const*" not in compact and "notify_dispatch<8>" in compact  # short names, no parameters
        assert "comm:deepep" in compact  # the kernel-class section names the library
        # before issue #15: 474 lines piped (rich's 80 columns), 355 at COLUMNS=100, the top-collectives table 428
        out = case["out"][100]
        assert len(out.splitlines()) < 100
        top = next(t for t in tables(out) if t["title"].startswith("top"))
        assert len(top["body"]) == 8


def test_markdown_has_the_same_tables(case):
    r = CliRunner().invoke(cli, ["analyze", *FAST, "--format", "markdown", *case_paths(case)])
    assert r.exit_code == 0, r.output
    heads = [x for x in r.output.splitlines() if x.startswith("### ")]
    titles = [t["title"].strip() for t in tables(case["out"][100])]
    assert [h.removeprefix("### ") for h in heads if h != "### Notes and warnings"] == titles
    for block in r.output.split("\n\n"):
        rows = [x for x in block.splitlines() if x.startswith("|")]
        if rows:
            assert len({x.count(" | ") for x in rows if not x.startswith("|-")}) == 1, block


def case_paths(case) -> list[str]:
    return case["summary"]["run"]["sources"]


def test_cut_name_keeps_the_function_name():
    n = "dpsk::ep::internode::combine<__nv_bfloat16, …>"
    assert cut_name(n, 60) == n
    assert cut_name(n, 30) == "…::combine<__nv_bfloat16, …>"
    assert cut_name(n, 20) == "…::combine<…>"
    assert cut_name(n, 10) == "dpsk::ep:…"
    assert cut_name("ncclDevKernel_AllGather_RING_LL", 12) == "ncclDevKern…"


def test_warnings_are_grouped_once_with_a_count():
    ws = [f"tests/x/rank{r}.json.gz: the trace names no process groups; {10 + r} collectives assumed" for r in range(5)]
    ws += [
        "rank 3: 2 device events have no launch record",
        "rank 7: 5 device events have no launch record",
        "rank 3: 2 device events have no launch record",
        "the run has no manifest",
    ]
    got = group_warnings(ws)
    assert got == [
        ws[0] + " (×5: 5 files)",
        "rank 3: 2 device events have no launch record (×2: ranks 3, 7)",
        "the run has no manifest",
    ]


def test_a_column_left_out_takes_its_explanation_along():
    from tests.helpers.report_fixtures import make_summary

    s = make_summary(n_ranks=3, n_steps=2, per_step=4)
    s["ranks"][0]["totals"]["multi_stream_comm_us"] = 1500.0  # the column shows only when it has something to say
    narrow, roomy = (" ".join(render_text(s, width=w).split()) for w in (80, 200))
    assert "comm on 2+ streams: time during which" not in narrow
    assert re.search(r"not shown: [^\n]*?comm on 2\+ streams ms \(at 80 columns; --wide shows them\)", narrow)
    assert "comm on 2+ streams: time during which" in roomy
    (row, *_) = [t for t in tables(render_text(s, width=200)) if t["title"].startswith("per rank")]
    assert "comm on 2+ streams ms" in row["header"][0]
    s["ranks"][0]["totals"]["multi_stream_comm_us"] = 0.0
    assert "comm on 2+ streams" not in render_text(s, width=200)  # nothing to say: neither column nor note
