"""The breakdowns on the real GPU traces of tests/data/kineto-gpu against an independent reading of the raw JSON
(json + gzip + Decimal, pure Python: sums per kernel name, unions, idle and host-wait time, launch delays), never
against tracekit's own output."""

import gzip
import json
import re
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from tracekit.analyzers.breakdowns.rank_breakdowns import breakdowns
from tracekit.loader.loading import LoadOptions, load

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto-gpu"
TRACES = [
    "allreduce-broadcast-2rank-rank0",
    "ddp-allreduce-2rank-rank1-oldformat",
    "pp-sendrecv-128rank-rank0",
    "pp-sendrecv-128rank-rank1",
    "single-rank-nocomm-nsresolution",
    "rocm-mi250-minitoy",
]
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def ns(value) -> int:
    return int((Decimal(value) * 1000).to_integral_value(ROUND_HALF_EVEN))


def read_raw(path: Path) -> dict:
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    windows: dict[int, tuple[int, int]] = {}
    launches: dict[int, tuple[int, int]] = {}
    device = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, args = e.get("cat"), e.get("args") or {}
        ts, dur = ns(e["ts"]), ns(e.get("dur", 0))
        m = STEP.match(str(e.get("name", "")))
        if m and cat not in DEVICE_CATS:
            windows.setdefault(int(m.group(1)), (ts, ts + dur))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launches.setdefault(args["correlation"], (ts, ts + dur))
        elif cat in DEVICE_CATS:
            device.append({"name": e["name"], "cat": cat, "ts": ts, "end": ts + dur, "dur": dur, "corr": args.get("correlation")})
    wins = sorted(windows.values())
    for d in device:
        launch = launches.get(d["corr"])
        d["launch"] = launch
        d["in_steps"] = launch is not None and any(a <= launch[0] < b for a, b in wins)
    return {"windows": wins, "spans": device_spans(wins, device), "device": device}


def device_spans(wins, device):
    """The steps as the analysis measures them (docs/analyze.md): window start -> end of the last device activity
    the step launched (at least the window end); a step whose device work begins only after the previous span
    ends starts there."""
    spans, prev_end = [], None
    for a, b in wins:
        mine = [d for d in device if d["launch"] is not None and a <= d["launch"][0] < b]
        end = max([b] + [d["end"] for d in mine])
        first = min((d["ts"] for d in mine), default=None)
        start = a
        if prev_end is not None and first is not None and first >= prev_end:
            start = min(max(a, prev_end), end)
        spans.append((start, end))
        prev_end = end if prev_end is None else max(prev_end, end)
    return spans


def merge(intervals):
    out = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def covered(union, lo, hi) -> int:
    return sum(max(0, min(b, hi) - max(a, lo)) for a, b in union)


def quantile(values, q):
    v = sorted(values)
    k = (len(v) - 1) * q
    i = int(k)
    return v[i] + (v[min(i + 1, len(v) - 1)] - v[i]) * (k - i)


@pytest.fixture(scope="module", params=TRACES)
def case(request):
    path = DATA / f"{request.param}.json.gz"
    traces = load([str(path)], options=LoadOptions(cache=False), executor="serial")
    (result,) = breakdowns(traces).values()
    return request.param, read_raw(path), result


def test_kernel_counts_and_totals_per_name(case):
    name, raw, b = case
    chosen = [d for d in raw["device"] if d["in_steps"]]
    expected: dict[str, list[int]] = {}
    for d in chosen:
        expected.setdefault(d["name"], []).append(d["dur"])
    rows = {r["name"]: r for r in b.to_dict()["kernel_breakdown"]}
    assert set(rows) == set(expected), name
    for kname, durs in expected.items():
        r = rows[kname]
        assert r["count"] == len(durs) and round(r["total_us"] * 1e3) == sum(durs), kname
        assert round(r["max_us"] * 1e3) == max(durs)
        assert r["p50_us"] * 1e3 == pytest.approx(quantile(durs, 0.5), abs=1e-6)
        assert r["p95_us"] * 1e3 == pytest.approx(quantile(durs, 0.95), abs=1e-6)
    busy = merge((d["ts"], d["end"]) for d in chosen)
    assert round(b.to_dict()["busy_partition"]["busy_us"] * 1e3) == sum(y - x for x, y in busy)


def test_idle_and_host_wait_time(case):
    name, raw, b = case
    busy = merge((d["ts"], d["end"]) for d in raw["device"])
    pending = [(d["launch"][1], d["ts"]) for d in raw["device"] if d["launch"] is not None]
    unknown_or_pending = merge([(x, y) for x, y in busy] + pending + unknown_gaps(raw["device"]))
    idle = sum((b_ - a) - covered(busy, a, b_) for a, b_ in raw["spans"])
    host = sum((b_ - a) - covered(unknown_or_pending, a, b_) for a, b_ in raw["spans"])
    ib = b.to_dict()["idle_breakdown"]
    assert round(ib["idle_us"] * 1e3) == idle, name
    assert round(ib["host_wait_us"] * 1e3) == host, name
    parts = ib["host_wait_us"] + ib["dependency_wait_us"] + ib["other_us"]
    assert parts == pytest.approx(ib["idle_us"], abs=1e-6)


def unknown_gaps(device):
    """For activities without a launch row: the gap since the previous activity on the same stream is unknown."""
    return []  # every device activity of these traces has its runtime call (checked below)


def test_every_device_activity_has_its_launch(case):
    _, raw, _ = case
    assert all(d["launch"] is not None for d in raw["device"])


def test_launch_delays(case):
    name, raw, b = case
    chosen = [d for d in raw["device"] if d["in_steps"]]
    delays = [d["ts"] - d["launch"][1] for d in chosen]
    ls = b.to_dict()["launch_stats"]
    assert ls["with_launch"] == len(chosen)
    assert ls["median_delay_us"] * 1e3 == pytest.approx(quantile(delays, 0.5), abs=1e-6), name
    assert ls["p95_delay_us"] * 1e3 == pytest.approx(quantile(delays, 0.95), abs=1e-6), name
    assert ls["negative_delays"] == sum(x < 0 for x in delays)
    bound = [d for d in chosen if d["cat"] == "kernel" and d["dur"] < d["launch"][1] - d["launch"][0]]
    assert ls["launch_bound_kernels"]["count"] == len(bound)


def test_class_totals_by_category(case):
    """Communication classes = the nccl kernels, memcpy/memset = the copy and set activities, the compute classes
    = every other kernel; and the shipped rules leave almost nothing unclassified on these traces."""
    name, raw, b = case
    chosen = [d for d in raw["device"] if d["in_steps"]]
    expected = {"comm": 0, "memcpy": 0, "memset": 0, "compute": 0}
    for d in chosen:
        if d["cat"] == "gpu_memcpy":
            expected["memcpy"] += d["dur"]
        elif d["cat"] == "gpu_memset":
            expected["memset"] += d["dur"]
        elif d["name"].startswith("nccl"):
            expected["comm"] += d["dur"]
        else:
            expected["compute"] += d["dur"]
    got = dict.fromkeys(expected, 0)
    for row in b.to_dict()["kernel_classes"]:
        c = row["class"]
        key = "comm" if c.startswith("comm:") else c if c in ("memcpy", "memset") else "compute"
        got[key] += round(row["total_us"] * 1e3)
    assert got == expected, name
    other = sum(r["total_us"] for r in b.to_dict()["kernel_classes"] if r["class"] == "other")
    assert other <= 0.01 * sum(r["total_us"] for r in b.to_dict()["kernel_classes"]), name


@pytest.mark.parametrize(
    ("needle", "expected"),
    [
        ("ampere_sgemm_128x64_nn", "gemm"),
        ("cutlass::Kernel<cutlass_80_tensorop_s1688gemm", "gemm"),
        ("cudnn::bn_fw_tr_1C11_singleread", "normalization"),
        ("LayerNormForwardCUDAKernel", "normalization"),
        ("winogradForwardData4x4", "convolution"),
        ("sm80_xmma_fprop_implicit_gemm", "convolution"),
        ("vectorized_elementwise_kernel<4, at::native::FillFunctor<float>", "elementwise"),
        ("at::native::reduce_kernel<512, 1", "reduction"),
        ("ncclKernel_AllReduce", "comm:nccl"),
        ("Memcpy DtoD", "memcpy"),
        ("Memset (Device)", "memset"),
        ("splitKreduce_kernel", "gemm"),
    ],
)
def test_real_kernels_get_their_class(needle, expected):
    from tracekit.analyzers.breakdowns.kernel_classes import ClassRuleSet
    from tracekit.model.events import EventKind

    names = sorted({d["name"] for t in TRACES for d in read_raw_cached(t)["device"] if needle in d["name"]})
    assert names, needle
    kind = {"memcpy": EventKind.MEMCPY, "memset": EventKind.MEMSET}.get(expected, EventKind.KERNEL)
    if expected.startswith("comm:"):
        kind = EventKind.COMM
    assert set(ClassRuleSet().classify(names, [int(kind)] * len(names))) == {expected}


_RAW: dict[str, dict] = {}


def read_raw_cached(name: str) -> dict:
    if name not in _RAW:
        _RAW[name] = read_raw(DATA / f"{name}.json.gz")
    return _RAW[name]


def test_idle_is_the_overlap_totals_idle(case):
    from tracekit.analyzers.comm.overlap import rank_overlap

    name, _, b = case
    traces = load([str(DATA / f"{name}.json.gz")], options=LoadOptions(cache=False), executor="serial")
    r = traces.ranks[0]
    ov = rank_overlap(traces.table(r), traces.info(r))
    assert b.idle.totals.idle_ns == ov.totals.idle_ns
    assert [s.step for s in b.idle.steps] == [s.step for s in ov.steps]


def test_breakdowns_is_an_analyzer():
    from tracekit.analyzers.breakdowns.rank_breakdowns import BreakdownAnalyzer, BreakdownOptions
    from tracekit.analyzers.registry import Analyzer

    assert isinstance(BreakdownAnalyzer(), Analyzer) and BreakdownAnalyzer.Options is BreakdownOptions
