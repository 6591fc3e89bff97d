"""Issue 27's "done when", on every GPU trace in tests/data (the same files as ../shared/traces) and the two-rank
pipeline pair: no communication kernel counted as compute, no collective with busbw 0 or 0 B (unknown is null),
and no two kernels printed under one name in the terminal's kernel table at any width."""

import glob

import pytest

from tests.helpers.data import DATA
from tracekit.analyzers import analyze
from tracekit.errors import EmptyWindowError
from tracekit.loader.classify import RuleSet
from tracekit.loader.loading import LoadOptions, load
from tracekit.reports.terminal import render_text

SETS = [[p] for p in sorted(glob.glob(str(DATA / "kineto-gpu*" / "*.json.gz")))]
SETS.append(sorted(glob.glob(str(DATA / "kineto-gpu" / "pp-sendrecv-128rank-rank*.json.gz"))))


@pytest.fixture(scope="module", params=SETS, ids=lambda ps: "+".join(p.rsplit("/", 1)[-1][:28] for p in ps))
def summary(request):
    ts = load(request.param, options=LoadOptions(cache=False), executor="serial")
    try:
        return analyze(ts).to_dict()
    except EmptyWindowError:
        pytest.skip("no complete step to measure")


def test_no_communication_kernel_is_compute(summary):
    assert summary["unrecognised_kernels"] == []
    for r in summary["ranks"]:
        rows = r["kernel_breakdown"] if isinstance(r["kernel_breakdown"], list) else []
        matched = RuleSet().match([x["name"] for x in rows])
        assert [x["name"] for x, m in zip(rows, matched) if m is not None and not x["class"].startswith("comm:")] == []


def test_no_collective_reads_zero(summary):
    for c in summary["collectives"]:
        assert c["bytes"] is None or c["bytes"] > 0, c
        assert c["busbw_gbps"] is None or c["busbw_gbps"] > 0, c
    for x in summary["by_dimension"]:
        assert (x["bytes"] is None or x["bytes"] > 0) and (x["busbw_gbps"] is None or x["busbw_gbps"] > 0), x


def _kernel_column(text: str) -> list[str]:
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("top ") and "kernels" in line), None)
    if at is None:
        return []
    body = []
    for line in lines[at + 4 :]:
        if not line.startswith("│"):
            break
        body.append(line.split("│")[1].strip())
    return body


@pytest.mark.parametrize("width", [60, 100, 160])
def test_no_two_kernels_print_as_one(summary, width):
    for top in (10, 40):
        names = _kernel_column(render_text(summary, width=width, top=top))
        assert len(names) == len(set(names)), names
