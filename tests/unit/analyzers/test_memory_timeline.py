"""The memory timeline: a hand-built table with known answers, and the real GPU trace with [memory] events against
an independent reading of its raw JSON (torch's Total Allocated, a sum of Bytes, live allocations paired by Addr,
the enclosing op found by brute force)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import numpy as np
import pytest

import tracekit
from tests.helpers.data import gpu_trace
from tracekit.analyzers.memory.timeline import BEFORE, NO_MEMORY, MemoryTimelineOptions, downsample, rank_memory
from tracekit.formats.summary import decode_summary
from tracekit.model.events import EventTable, memory_device_code, memory_device_label

CUDA0, CPU = memory_device_code(1, 0), memory_device_code(0, -1)


def _op(name, ts, dur, kind="CPU_OP", tid=1, step=-1):
    return {"name": name, "kind": kind, "ts_ns": ts, "dur_ns": dur, "pid": 7, "stream": tid, "step": step}


def _mem(ts, nbytes, total, addr, device=CUDA0, reserved=1 << 20, tid=1, step=-1):
    return {
        "name": "[memory]",
        "kind": "MEMORY",
        "ts_ns": ts,
        "dur_ns": 0,
        "pid": 7,
        "stream": tid,
        "step": step,
        "mem_bytes": nbytes,
        "mem_total": total,
        "mem_reserved": reserved,
        "mem_addr": addr,
        "mem_device": device,
    }


def _table(add2: int = 50):
    """Step 1 [0, 1000), step 2 [1000, 2000). 100 bytes live before the trace (freed at 1500, at addr 9). Step 1:
    aten::linear > aten::mm allocates 400 @1, aten::add 200 @2 (outside linear), mm's 400 freed at 500. Step 2: linear >
    mm 300 @3 at 1100, add 50 @4 at 1200 -> peak 100+200+300+50 = 650 at 1200; then frees. A CPU allocation on
    another thread, inside no op."""
    return EventTable.from_rows(
        [
            _op("ProfilerStep#1", 0, 1000, "STEP", step=1),
            _op("ProfilerStep#2", 1000, 1000, "STEP", step=2),
            _op("aten::linear", 10, 300, step=1),
            _op("aten::mm", 20, 100, step=1),
            _op("aten::add", 400, 50, step=1),
            _op("aten::linear", 1050, 300, step=2),
            _op("aten::mm", 1060, 100, step=2),
            _op("aten::add", 1190, 20, step=2),  # inside linear, after mm: innermost add, top-level linear
            _mem(30, 400, 500, 1, step=1),
            _mem(410, 200, 700, 2, step=1),
            _mem(500, -400, 300, 1, step=1),
            _mem(1100, 300, 600, 3, step=2),
            _mem(1200, add2, 600 + add2, 4, step=2),
            _mem(1500, -100, 500 + add2, 9, step=2),
            _mem(1600, -300, 200 + add2, 3, step=2),
            _mem(1700, 64, 64, 5, device=CPU, reserved=-1, tid=2, step=2),
        ]
    )


def test_hand_built_table_known_answers():
    m = rank_memory(_table(), 0)
    assert m.available
    cuda, cpu = {d.device: d for d in m.devices}["cuda:0"], {d.device: d for d in m.devices}["cpu"]
    assert (cuda.peak_allocated_bytes, cuda.peak_us, cuda.peak_step) == (700, 0.41, 1)
    assert (cuda.start_allocated_bytes, cuda.allocated_bytes, cuda.freed_bytes) == (100, 950, 800)
    assert cuda.mismatched_totals == 0 and cuda.events == 7
    # at 410 ns the live allocations are @1 (400, mm under linear), @2 (200, add) and 100 from before the trace
    assert cuda.unattributed_bytes == 100
    rows = m.allocators_frame()
    got = {(r.device, r.op, r.top_level_op): (r.live_bytes, r.allocations) for r in rows.itertuples()}
    assert got == {
        ("cuda:0", "aten::mm", "aten::linear"): (400, 1),
        ("cuda:0", "aten::add", "aten::add"): (200, 1),
        ("cpu", "(no enclosing op)", "(no enclosing op)"): (64, 1),
    }
    assert rows[rows.device == "cuda:0"].live_bytes.sum() + cuda.unattributed_bytes == cuda.peak_allocated_bytes
    steps = {(r.step, r.device): (r.peak_allocated_bytes, r.peak_us, r.events) for r in m.steps_frame().itertuples()}
    assert steps == {(1, "cuda:0"): (700, 0.41, 3), (2, "cuda:0"): (650, 1.2, 4), (2, "cpu"): (64, 1.7, 1)}
    assert cpu.peak_reserved_bytes == 0 and cuda.peak_reserved_bytes == 1 << 20


def test_the_step_two_peak_has_its_own_allocators():
    """With 500 bytes for step 2's add the peak moves to 1200 ns: 100 from before + step 1's add (200, still live)
    + mm 300 and add 500, both under linear."""
    m = rank_memory(_table(add2=500), 0)
    cuda = m.devices[1]
    assert (cuda.peak_allocated_bytes, cuda.peak_step, cuda.peak_us) == (1100, 2, 1.2)
    got = {(r.op, r.top_level_op): r.live_bytes for r in m.allocators_frame().itertuples() if r.device == "cuda:0"}
    assert got == {("aten::mm", "aten::linear"): 300, ("aten::add", "aten::linear"): 500, ("aten::add", "aten::add"): 200}
    assert cuda.unattributed_bytes == 100
    assert [r.op for r in m.allocators_frame().itertuples() if r.device == "cuda:0"] == ["aten::add", "aten::mm", "aten::add"]


def test_a_total_that_disagrees_with_the_bytes_is_counted():
    t = _table()
    total = t["mem_total"].copy()
    total[np.flatnonzero(t["mem_total"] == 600)] = 601
    m = rank_memory(t.with_columns(mem_total=total), 0)
    assert m.devices[1].mismatched_totals == 1


def test_no_memory_events_says_why():
    m = rank_memory(EventTable.from_rows([_op("aten::mm", 0, 10)]), 3)
    assert not m.available and m.to_dict() == {"available": False, "reason": NO_MEMORY}


def test_downsample_keeps_every_bucket_maximum_and_the_ends():
    rng = np.random.default_rng(5)
    v = rng.integers(0, 10**6, 10_001)
    keep = downsample(v, 100)
    assert len(keep) <= 100 and keep[0] == 0 and keep[-1] == len(v) - 1
    for limit in (3, 4, 5, 99, 1000, 10_000):
        assert len(downsample(v, limit)) <= limit and v[downsample(v, limit)].max() == v.max()
    assert v[keep].max() == v.max()
    edges = np.linspace(0, len(v), 50).astype(int)
    for a, b in zip(edges[:-1], edges[1:]):
        assert v[a:b].max() in v[keep[(keep >= a) & (keep < b)]]
    assert (downsample(v[:50], 100) == np.arange(50)).all()


def test_device_labels():
    assert [memory_device_label(c) for c in (CPU, CUDA0, memory_device_code(1, 3), -1)] == ["cpu", "cuda:0", "cuda:3", "unknown"]
    assert memory_device_code(1, 400) == -1


# -- the real trace ------------------------------------------------------------------------------------------------

TRACE = "ddp-allreduce-2rank-rank1-oldformat.json.gz"


@pytest.fixture(scope="module")
def raw():
    with gzip.open(gpu_trace(TRACE), "rt") as f:
        return json.load(f)["traceEvents"]


@pytest.fixture(scope="module")
def analysis():
    return tracekit.analyze(tracekit.load(gpu_trace(TRACE)))


def _raw_memory(raw):
    mem = [e for e in raw if e.get("name") == "[memory]" and e.get("ph") == "i"]
    mem.sort(key=lambda e: e["ts"])  # Python's sort is stable: file order within a timestamp
    by_dev = defaultdict(list)
    for e in mem:
        a = e["args"]
        by_dev[memory_device_label(memory_device_code(a["Device Type"], a["Device Id"]))].append(e)
    return by_dev


@pytest.mark.slow
def test_real_trace_peaks_against_the_raw_json(raw, analysis):
    doc = analysis.to_dict()
    mt = doc["ranks"][0]["memory_timeline"]
    steps = [
        (int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"])
        for e in raw
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
    ]
    devices = {d["device"]: d for d in mt["devices"]}
    for dev, events in _raw_memory(raw).items():
        totals = [e["args"]["Total Allocated"] for e in events]
        running = events[0]["args"]["Total Allocated"] - events[0]["args"]["Bytes"]
        sums = []
        for e in events:
            running += e["args"]["Bytes"]
            sums.append(running)
        assert sums == totals  # torch's own Total Allocated is the running sum of Bytes on this trace
        d = devices[dev]
        assert d["peak_allocated_bytes"] == max(totals) and d["events"] == len(events)
        assert d["max_reserved_bytes"] == max(e["args"]["Total Reserved"] for e in events)
        assert d["mismatched_totals"] == 0
        for n, a, b in steps:
            inside = [e["args"]["Total Allocated"] for e in events if a <= e["ts"] < b]
            row = next(r for r in mt["steps"] if r["step"] == n and r["device"] == dev)
            assert row["peak_allocated_bytes"] == max(inside) and row["events"] == len(inside)


@pytest.mark.slow
def test_real_trace_allocators_against_brute_force(raw, analysis):
    mt = analysis.memory[1]
    events = _raw_memory(raw)["cuda:1"]
    totals = [e["args"]["Total Allocated"] for e in events]
    p = totals.index(max(totals))
    live: dict[int, dict] = {}
    for e in events[: p + 1]:
        if e["args"]["Bytes"] > 0:
            live[e["args"]["Addr"]] = e
        else:
            live.pop(e["args"]["Addr"], None)
    ops = defaultdict(list)
    for e in raw:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"):
            ops[(e["pid"], e["tid"])].append(e)
    want: dict[tuple[str, str], int] = defaultdict(int)
    for e in live.values():
        inside = [o for o in ops[(e["pid"], e["tid"])] if o["ts"] <= e["ts"] <= o["ts"] + o["dur"]]
        inner = max(inside, key=lambda o: (o["ts"], -o["dur"]))["name"] if inside else "(no enclosing op)"
        below = [o for o in inside if not o["name"].startswith("ProfilerStep#")]
        outer = min(below, key=lambda o: (o["ts"], -o["dur"]))["name"] if below else inner
        want[(inner, outer)] += e["args"]["Bytes"]
    every = rank_memory(analysis.traces.table(1), 1, MemoryTimelineOptions(memory_top=10**6)).allocators_frame()
    every = every[every.device == "cuda:1"]
    assert {(r.op, r.top_level_op): r.live_bytes for r in every.itertuples()} == want
    top = mt.allocators_frame()
    assert len(top) == 11 and top[top.device == "cuda:1"].live_bytes.tolist() == sorted(want.values())[::-1][:10]
    dev = next(d for d in mt.devices if d.device == "cuda:1")
    assert dev.unattributed_bytes == max(totals) - sum(want.values())
    assert BEFORE  # the label the report uses for the unattributed bytes


@pytest.mark.slow
def test_real_summary_validates_and_downsamples(analysis):
    doc = analysis.to_dict()
    back = decode_summary(json.dumps(doc).encode())
    mt = back.ranks[0].memory_timeline
    assert mt.available and mt.downsampled and mt.points_total == 28010
    assert all(len(p.t_us) <= mt.max_points for p in mt.points)
    peak = {d.device: d.peak_allocated_bytes for d in mt.devices}
    assert {p.device: max(p.allocated_bytes) for p in mt.points} == peak  # downsampling kept the peaks
    assert "downsampled" in mt.notes[0]
    more = tracekit.analyze(tracekit.load(gpu_trace(TRACE)), memory_points=4000).memory[1].to_dict()
    lengths = {p["device"]: len(p["t_us"]) for p in more["points"]}
    assert lengths["cpu"] == 1240 and 2000 < lengths["cuda:1"] <= 4000 and more["downsampled"]


@pytest.mark.slow
def test_memory_points_option_on_the_command_line():
    from click.testing import CliRunner

    from tracekit.cli import cli

    r = CliRunner().invoke(cli, ["analyze", gpu_trace(TRACE), "--format", "json", "--memory-points", "50"])
    assert r.exit_code == 0, r.output
    mt = json.loads(r.output)["ranks"][0]["memory_timeline"]
    assert mt["max_points"] == 50 and all(len(p["t_us"]) <= 50 for p in mt["points"])
    assert "--memory-points" in mt["notes"][0]
    assert {p["device"]: max(p["allocated_bytes"]) for p in mt["points"]} == {
        d["device"]: d["peak_allocated_bytes"] for d in mt["devices"]
    }
    bad = CliRunner().invoke(cli, ["analyze", gpu_trace(TRACE), "--memory-points", "1"])
    assert bad.exit_code == 2
