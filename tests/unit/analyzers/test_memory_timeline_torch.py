"""The memory timeline of real CPU runs against torch's own figures: key_averages' self_cpu_memory_usage (the same
attribution rule, computed by torch), the Total Allocated the events carry (against a sum of Bytes), torch's own
plot of its memory timeline (export_memory_timeline) against tracekit's reading of the raw export; the raw export
as a hostile input; tracekit.profile and `tracekit run` with profile_memory."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import tracekit
from tracekit.analyzers.memory.timeline import NO_MEMORY, NO_OP, enclosing_ops, rank_memory
from tracekit.analyzers.memory.timeline_export import export_timeline, read_export_timeline
from tracekit.cli import cli
from tracekit.errors import TraceFormatError
from tracekit.loader.memory_export import CATEGORIES, read_memory_export
from tracekit.model.events import EventKind as K

pytestmark = pytest.mark.slow  # records real torch.profiler runs
torch = pytest.importorskip("torch")
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "kineto-gpu-more" / "memory-timeline-export.raw.gz"


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))


_PROFILE = """
import json, sys, warnings
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))
x = torch.randn(16, 32)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True,
                            record_shapes=True, with_stack=True) as prof:
    for _ in range(2):
        net(x).square().mean().backward()
        prof.step()
out = sys.argv[1]
prof.export_chrome_trace(out + "/trace.json")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    prof.export_memory_timeline(out + "/mem.raw.json.gz", "cpu")
    prof.export_memory_timeline(out + "/mem.json.gz", "cpu")
usage = {e.key: e.self_cpu_memory_usage for e in prof.key_averages() if e.self_cpu_memory_usage}
json.dump({"self_cpu_memory_usage": usage, "future_warning": any(issubclass(w.category, FutureWarning)
                                                                 for w in caught)}, open(out + "/torch.json", "w"))
"""


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """Two training steps under torch.profiler with memory, shapes and stacks (what export_memory_timeline needs),
    in a fresh interpreter: in a whole-suite run, an earlier test's Dask cluster left this process in a state
    where torch attributed 33,408 B differently (the test passed alone). torch's own per-op figures come back as
    JSON beside the trace."""
    out = tmp_path_factory.mktemp("torchmem")
    script = out / "profile_two_steps.py"  # a file, so that torch names its frames "<file>.py(line): ..."
    script.write_text(_PROFILE)
    subprocess.run([sys.executable, str(script), str(out)], check=True, timeout=300)
    doc = json.loads((out / "torch.json").read_text())
    assert doc["future_warning"]  # export_memory_timeline is deprecated in torch 2.13: still what users call
    return doc["self_cpu_memory_usage"], out


def test_attribution_equals_torchs_self_cpu_memory_usage(profiled):
    torchs, out = profiled
    ts = tracekit.load([str(out / "trace.json")])
    t = ts.table(ts.ranks[0])
    rows = np.flatnonzero(t.mask_kind(K.MEMORY))
    rows = rows[np.argsort(t["ts_ns"][rows], kind="stable")]
    inner, _ = enclosing_ops(t, rows)
    names = [*t.strings, NO_OP]
    ours: dict[str, int] = defaultdict(int)
    for i, b in zip(inner.tolist(), t["mem_bytes"][rows].tolist()):
        ours[names[i]] += b
    # the loader drops with_stack's python_function frames; what torch gives them has no enclosing op for tracekit
    frames = {k for k in torchs if ".py(" in k}
    assert {k: v for k, v in torchs.items() if k not in frames} == {k: v for k, v in ours.items() if v and k != NO_OP}
    assert ours.get(NO_OP, 0) == sum(torchs[k] for k in frames)
    assert len(torchs) > 8  # a real spread of ops (addmm, mm, gelu, AccumulateGrad, ...)


def test_timeline_equals_torchs_totals(profiled):
    _, out = profiled
    raw = [e for e in json.loads((out / "trace.json").read_text())["traceEvents"] if e.get("name") == "[memory]"]
    ts = tracekit.load([str(out / "trace.json")])
    m = rank_memory(ts.table(ts.ranks[0]), 0)
    (dev,) = m.devices
    assert dev.device == "cpu" and dev.events == len(raw)
    assert dev.mismatched_totals == 0  # torch's Total Allocated == the running sum of Bytes, every event
    assert dev.peak_allocated_bytes == max(e["args"]["Total Allocated"] for e in raw)
    assert dev.allocated_bytes == sum(e["args"]["Bytes"] for e in raw if e["args"]["Bytes"] > 0)
    # everything allocated in the window is attributed: the live rows add up to the peak
    assert m.allocators_frame().live_bytes.sum() + dev.unattributed_bytes == dev.peak_allocated_bytes


def test_raw_export_reading_equals_torchs_own_plot(profiled):
    """torch's plot (export_memory_timeline to .json.gz: [times_us, sizes by category]) is the state after each µs;
    tracekit's reading of the raw export, taken at the last entry of each µs, must give the same sizes."""
    _, out = profiled
    with gzip.open(out / "mem.json.gz", "rt") as f:
        times, sizes = json.load(f)
    tl = read_export_timeline(out / "mem.raw.json.gz")
    # torch's plot takes int(t / 1000): a float division, so epoch ns land on the nearest 0.25 µs float first
    us = np.array([int(t / 1000) for t in tl.t_ns.tolist()])
    last = np.r_[us[1:] != us[:-1], True]
    mine = {int(u): row.tolist() for u, row in zip(us[last], tl.by_category[last])}
    # torch's index 0 is unused, then the categories in _CATEGORY_TO_INDEX order; its pre-existing tensors come first
    # at the first timestamp (a point of their own): the last point of each µs is the state after it
    theirs = {t: row[1:] for t, row in zip(times, sizes)}
    assert mine == theirs
    first = min(times)
    assert tl.peak_bytes == max(sum(s) for t, s in zip(times, sizes) if t != -1) and first > 0
    assert tl.category_bytes_at_peak()["parameter"] > 0 and len(CATEGORIES) == len(sizes[0]) - 1


def test_the_real_raw_export_against_a_python_reading():
    with gzip.open(SAMPLE, "rt") as f:
        rows = json.load(f)
    tl = read_export_timeline(SAMPLE)
    state, best, by_cat = 0, 0, [0] * 8
    cats: list[int] = [0] * 8
    first = min(r[0] for r in rows if r[0] >= 0)
    rows = sorted(rows, key=lambda r: r[0] if r[0] >= 0 else first)  # stable: the file order within a timestamp
    for i, (ts, _, nbytes, cat) in enumerate(rows):
        state += nbytes
        cats[cat] += nbytes
        end_of_ts = i + 1 == len(rows) or (rows[i + 1][0] if rows[i + 1][0] >= 0 else first) != (ts if ts >= 0 else first)
        if end_of_ts and state > best:
            best, by_cat = state, list(cats)
    assert tl.peak_bytes == best == 3_082_832_104
    assert list(tl.category_bytes_at_peak().values()) == by_cat
    assert tl.preexisting_bytes == sum(r[2] for r in rows if r[0] == -1)
    assert tl.to_dict()["end_allocated_bytes"] == state


BAD = {
    "empty": (b"", "empty file"),
    "not json": (b"[[1, 2", "not valid JSON"),
    "a kineto trace": (b'{"traceEvents": []}', "a JSON object"),
    "empty list": (b"[]", "no memory events"),
    "short entry": (b"[[1, 2, 3]]", "length 4"),
    "unknown action": (b"[[1, 9, 3, 0]]", "$[0][1]"),
    "unknown category": (b"[[1, 2, 3, 8]]", "$[0][3]"),
    "a string": (b'[[1, 2, "3", 0]]', "$[0][2]"),
    "a float": (b"[[1.5, 2, 3, 0]]", "$[0][0]"),
    "NaN": (b"[[NaN, 2, 3, 0]]", "not valid JSON"),
    "huge": (b"[[1, 2, 1e300, 0]]", "$[0][2]"),
    "negative create": (b"[[1, 2, -3, 0]]", "negative size"),
    "positive destroy": (b"[[1, 4, 3, 0]]", "positive size on a destroy"),
    "time goes back": (b"[[5, 2, 3, 0], [4, 4, -3, 0]]", "entry 1"),
    "below -1": (b"[[-7, 1, 3, 0]]", "below -1"),
    "-1 not preexisting": (b"[[-1, 2, 3, 0]]", "timestamp -1"),
    "deep": (b"[" * 5000 + b"]" * 5000, "nested"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_raw_export_is_one_line(tmp_path, case):
    data, what = BAD[case]
    p = tmp_path / "x.raw.json"
    p.write_bytes(data)
    with pytest.raises(TraceFormatError) as err:
        read_memory_export(p)
    msg = str(err.value)
    assert "\n" not in msg and str(p) in msg and what in msg, msg
    r = CliRunner().invoke(cli, ["memory", "timeline", str(p)])
    assert r.exit_code == 3 and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_gzip_export_and_the_cli(tmp_path):
    p = tmp_path / "x.raw.json.gz"
    p.write_bytes(gzip.compress(b"[[-1, 1, 100, 0], [10, 2, 50, 4], [10, 2, 30, 3], [20, 4, -30, 3], [30, 4, -50, 4]]"))
    tl = export_timeline(read_memory_export(p))
    assert tl.t_us.tolist() == [0.01, 0.01, 0.02, 0.03][1:] and tl.allocated_bytes.tolist() == [180, 150, 100]
    assert tl.category_bytes_at_peak() == {**dict.fromkeys(CATEGORIES, 0), "parameter": 100, "activation": 50, "temporary": 30}
    r = CliRunner().invoke(cli, ["memory", "timeline", str(p), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.output)["peak_allocated_bytes"] == 180
    r = CliRunner().invoke(cli, ["memory", "timeline", str(p)])
    assert r.exit_code == 0 and "activation" in r.output and "180 B" in r.output, r.output


def test_tracekit_profile_records_memory_when_asked(tmp_path):
    net, x = _net(), torch.randn(8, 32)
    for flag, out in ((True, tmp_path / "mem"), (False, tmp_path / "plain")):
        with tracekit.profile(out, wait=0, warmup=1, active=2, profile_memory=flag) as p:
            for _ in range(4):
                net(x).sum().backward()
                p.step()
        mt = tracekit.analyze(tracekit.load([str(out)])).to_dict()["ranks"][0]["memory_timeline"]
        if flag:
            assert mt["available"] and mt["devices"][0]["device"] == "cpu" and mt["devices"][0]["mismatched_totals"] == 0
            peak = mt["devices"][0]["peak_allocated_bytes"]
            assert len({s["step"] for s in mt["steps"]}) == 2 and max(s["peak_allocated_bytes"] for s in mt["steps"]) == peak
        else:
            assert mt == {"available": False, "reason": NO_MEMORY}


def test_tracekit_run_profile_memory(tmp_path):
    """The real command (one spawned process: the smallest run that still goes through the runner)."""
    out = tmp_path / "run"
    r = CliRunner().invoke(
        cli,
        [
            "run",
            "--workload",
            "dp",
            "--dp",
            "1",
            "--layers",
            "1",
            "--steps",
            "1",
            "--seq",
            "8",
            "--hidden",
            "16",
            "--heads",
            "2",
            "--batch",
            "2",
            "--profile-memory",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = tracekit.analyze(tracekit.load([str(out)])).to_dict()
    (dev,) = doc["ranks"][0]["memory_timeline"]["devices"]
    raw = json.loads(gzip.decompress((out / "rank0.trace.json.gz").read_bytes()))["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in raw if e.get("name") == "[memory]"]
    assert dev["events"] == len(totals) > 0 and dev["peak_allocated_bytes"] == max(totals)
