"""The HTML report's single-rank breakdowns: the short-name sums against a hand-built table, every GPU trace in
tests/data renders the four device sections, and in headless Chromium (no console errors) the numbers shown equal
the summary, the short-name sums and the activation figures equal an independent reading of the summary, the
memory chart draws the summary's points, and a CPU-only run says why instead of printing zeros."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest
import torch

import tracekit
from tests.helpers.data import GPU, gpu_trace
from tests.helpers.report_page import ARTIFACTS, check_numbers, open_report, summary_value
from tracekit.analyzers.breakdowns.rank_breakdowns import CPU_ONLY
from tracekit.reports import get_reporter
from tracekit.reports.html_breakdowns import TOP_KERNELS, kernels_by_short_name

SHOWN = """JSON.stringify(Array.from(document.querySelectorAll('#breakdowns [data-key]')).map(
  e => [e.dataset.key, e.dataset.value, e.textContent]))"""
DERIVED = """JSON.stringify(Array.from(document.querySelectorAll('[data-derived]')).map(
  e => [e.dataset.derived, e.dataset.value]))"""


def check_breakdown_numbers(page, summary: dict) -> int:
    """Every number of the breakdown sections equals the summary value its data-key names."""
    shown = json.loads(page.eval(SHOWN))
    for key, value, text in shown:
        want = summary_value(summary, key)
        if want is None:
            assert value == "null" and text == "—", key
        else:
            assert float(value) == pytest.approx(want, rel=1e-9, abs=1e-9), key
            assert text.strip() and text != "—", key
    return len(shown)


def test_short_name_sums_known_answer():
    rows = [
        {"name": "a<int>", "short_name": "a<…>", "class": "gemm", "count": 2, "total_us": 3.0, "share": 0.3},
        {"name": "a<float>", "short_name": "a<…>", "class": "gemm", "count": 1, "total_us": 1.5, "share": 0.15},
        {"name": "b", "short_name": "b", "class": "memcpy", "count": 5, "total_us": 4.0, "share": 0.4},
        {"name": "c<x>", "short_name": "c<…>", "class": "gemm", "count": 1, "total_us": 0.5, "share": 0.05},
        {"name": "c<y>", "short_name": "c<…>", "class": "other", "count": 1, "total_us": 0.5, "share": 0.05},
    ]
    got = [(r["short_name"], r["class"], r["count"], r["total_us"], r["names"]) for r in kernels_by_short_name(rows)]
    assert got == [("a<…>", "gemm", 3, 4.5, 2), ("b", "memcpy", 5, 4.0, 1), ("c<…>", "mixed", 2, 1.0, 2)]


@pytest.fixture(scope="module")
def ddp_summary():
    """The real GPU trace with [memory] events, plus activation figures for its rank (the report only arranges
    them: a hand-written activation_memory section is enough to show them beside the peak)."""
    s = tracekit.analyze(tracekit.load(gpu_trace("ddp-allreduce-2rank-rank1-oldformat.json.gz"))).to_dict()
    s["activation_memory"] = {
        "layers": [
            {
                "rank": 1,
                "layer": 0,
                "measured_bytes": 1_000_000_000,
                "model_bytes": 900_000_000,
                "delta_bytes": 10**8,
                "model": "dp",
            },
            {
                "rank": 1,
                "layer": 1,
                "measured_bytes": 500_000_000,
                "model_bytes": 450_000_000,
                "delta_bytes": 5 * 10**7,
                "model": "dp",
            },
        ],
        "model": {},
        "notes": [],
    }
    return s


@pytest.mark.parametrize("name", sorted(p.name for p in GPU.glob("*.json.gz")))
def test_every_gpu_trace_shows_the_device_sections(name, tmp_path):
    s = tracekit.analyze(tracekit.load(gpu_trace(name))).to_dict()
    html = get_reporter("html").render(s, tmp_path / "r.html").path.read_text(encoding="utf-8")
    for r in s["ranks"][:4]:
        for section in ("kernels", "busy", "idle", "launches", "memory-timeline"):
            assert f'id="{section}-{r["rank"]}"' in html
        assert CPU_ONLY not in html
        mem = r["memory_timeline"]
        assert ('data-unavailable="memory_timeline"' in html) == (not mem["available"])


def test_gpu_breakdowns_in_the_browser(browser, tmp_path, ddp_summary):
    s = ddp_summary
    _, page = open_report(browser, tmp_path, s, "breakdowns-ddp")
    try:
        assert page.eval("document.body.dataset.breakdownsRendered") == "1"
        assert page.errors() == []
        check_numbers(page, s)  # the whole page, the breakdowns' data-keys included
        assert check_breakdown_numbers(page, s) >= 150
        rank = s["ranks"][0]
        keys = json.loads(
            page.eval("JSON.stringify(Array.from(document.querySelectorAll('[data-key]')).map(e => e.dataset.key))")
        )
        for part in (
            "busy_partition.parts.0.us",
            "idle_breakdown.host_wait_us",
            "launch_stats.median_delay_us",
            "memory_timeline.devices.1.peak_allocated_bytes",
            "memory_timeline.top_allocators.0.live_bytes",
            "memory_timeline.steps.5.peak_allocated_bytes",
        ):
            assert f"ranks.0.{part}" in keys
        derived = dict(json.loads(page.eval(DERIVED)))
        by_short: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        for k in rank["kernel_breakdown"]:
            acc = by_short[k["short_name"]]
            acc[0] += k["count"]
            acc[1] += k["total_us"]
            acc[2] += k["share"]
        top = sorted(by_short.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP_KERNELS]
        for j, (_, (count, total, share)) in enumerate(top):
            base = f"derived.ranks.0.kernels_by_short_name.{j}"
            assert int(derived[f"{base}.count"]) == count
            assert float(derived[f"{base}.total_us"]) == pytest.approx(total, rel=1e-12)
            assert float(derived[f"{base}.share"]) == pytest.approx(share, rel=1e-12)
        peak = max(d["peak_allocated_bytes"] for d in rank["memory_timeline"]["devices"])
        assert int(derived["derived.ranks.0.activation_measured_bytes"]) == 1_500_000_000
        assert int(derived["derived.ranks.0.memory_peak_allocated_bytes"]) == peak
        assert float(derived["derived.ranks.0.activation_share_of_peak"]) == pytest.approx(1.5e9 / peak)
        # the chart draws the summary's points: per device, the same count and the same maximum
        drawn = json.loads(
            page.eval("""JSON.stringify(document.getElementById('chart-memory-timeline-1').data.map(
            t => [t.name, t.y.length, Math.max.apply(null, t.y)]))""")
        )
        for p in rank["memory_timeline"]["points"]:
            assert [p["device"] + " allocated", len(p["t_us"]), max(p["allocated_bytes"])] in drawn
        assert any(name == "cuda:1 reserved" for name, _, _ in drawn)
        text = page.eval("document.getElementById('breakdowns').innerText")
        assert "points downsampled" in text and "memory_points" in text
        page.screenshot(ARTIFACTS / "report-breakdowns-gpu.png")
    finally:
        page.close()


def test_cpu_run_says_why_and_shows_its_memory(browser, tmp_path):
    torch.manual_seed(0)
    net, x = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)), torch.randn(4, 16)
    with tracekit.profile(tmp_path / "run", wait=0, warmup=1, active=2, profile_memory=True) as p:
        for _ in range(4):
            net(x).sum().backward()
            p.step()
    s = tracekit.analyze(tracekit.load([str(tmp_path / "run")])).to_dict()
    assert s["run"]["device_type"] == "cpu"
    _, page = open_report(browser, tmp_path, s, "breakdowns-cpu")
    try:
        assert page.errors() == [] and page.eval("document.body.dataset.breakdownsRendered") == "1"
        assert check_breakdown_numbers(page, s) > 10
        why = page.eval("document.querySelector('[data-unavailable=device_breakdowns]').innerText")
        assert why == CPU_ONLY
        for section in ("kernels", "busy", "idle", "launches"):  # no zero tables for what a CPU run has not
            assert page.eval(f"document.getElementById('{section}-0')") is None
        assert (
            page.eval("document.querySelectorAll('#breakdowns-rank-0 table.kernels, #breakdowns-rank-0 table.busy').length") == 0
        )
        drawn = json.loads(
            page.eval("""JSON.stringify(document.getElementById('chart-memory-timeline-0').data.map(
            t => [t.name, Math.max.apply(null, t.y)]))""")
        )
        assert drawn == [["cpu allocated", s["ranks"][0]["memory_timeline"]["devices"][0]["peak_allocated_bytes"]]]
        text = page.eval("document.getElementById('breakdowns-rank-0').innerText")
        assert re.search(r"aten::(addmm|mm|relu|empty)", text)
    finally:
        page.close()


def test_per_step_tables_keep_the_steps_that_matter_when_there_are_many(ddp_summary):
    """12,468 steps once made a 14 MB idle table: past MAX_STEP_ROWS the table keeps the steps with the most idle
    time (and the memory table the highest peaks), in step order, each cell still naming its own summary index."""
    from tracekit.reports.html_breakdowns import MAX_STEP_ROWS, context

    s = json.loads(json.dumps(ddp_summary))
    rank = next(r for r in s["ranks"] if r.get("idle_breakdown", {}).get("steps"))
    template = rank["idle_breakdown"]["steps"][0]
    n = 3 * MAX_STEP_ROWS + 7
    idle = [(j * 7919) % n for j in range(n)]  # a permutation of 0..n-1: the top ones are known
    rank["idle_breakdown"]["steps"] = [dict(template, step=j, idle_us=float(idle[j])) for j in range(n)]
    block = next(b for b in context(s)["breakdowns"]["ranks"] if b["rank"] == rank["rank"])
    shown = [row["step"] for row in block["idle"]["steps"]]
    assert shown == sorted(j for j in range(n) if idle[j] >= n - MAX_STEP_ROWS)
    assert any(f"{MAX_STEP_ROWS} of {n:,} steps shown" in note for note in block["idle"]["notes"])
    for row in block["idle"]["steps"]:
        assert row["cells"][1].key.endswith(f"idle_breakdown.steps.{row['step']}.idle_us")
    rank["idle_breakdown"]["steps"] = rank["idle_breakdown"]["steps"][:MAX_STEP_ROWS]
    block = next(b for b in context(s)["breakdowns"]["ranks"] if b["rank"] == rank["rank"])
    assert len(block["idle"]["steps"]) == MAX_STEP_ROWS and not any("steps shown" in n for n in block["idle"]["notes"])
