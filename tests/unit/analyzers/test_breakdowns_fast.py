"""The single-rank breakdowns on every trace in tests/data against an independent reading of the raw JSON
(tests/helpers/breakdown_oracle.py, which imports nothing from tracekit): kernel rows by name, the busy time and
its partition, class totals from the hand-labelled conformance table, launch delays, the stream queue, outliers
and the queue depth per step. Also the breakdowns that analyze() gives the comm analyzer's step plans against
those planned afresh, and the grouped percentile against ``np.percentile`` group by group."""

import glob

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import breakdown_oracle as oracle
from tests.helpers.data import DATA
from tracekit.analyzers import analyze
from tracekit.analyzers.arrays import group_bounds, group_percentiles, unique
from tracekit.analyzers.breakdowns.rank_breakdowns import BreakdownOptions, rank_breakdowns
from tracekit.analyzers.comm.steps import _launched
from tracekit.errors import EmptyWindowError
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import DEVICE_KINDS

TRACES = sorted(glob.glob(str(DATA / "kineto-gpu*" / "*.json.gz")) + glob.glob(str(DATA / "kineto-tb-plugin" / "*.json.gz")))
approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-9)


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.rsplit("/", 1)[-1])
def traced(request):
    ts = load([request.param], options=LoadOptions(cache=False), executor="serial")
    (rank,) = ts.ranks
    raw = oracle.read(request.param)
    b = rank_breakdowns(ts, rank, BreakdownOptions()).to_dict()
    return ts, rank, raw, b


def _available(section) -> bool:
    return not (isinstance(section, dict) and section.get("available") is False)


def test_kernel_rows_and_busy_time(traced):
    _, _, raw, b = traced
    if not _available(b["kernel_breakdown"]):
        assert not [a for a in oracle.scope(raw) if a.kind in oracle.BUSY]
        return
    acts = oracle.scope(raw)
    want = oracle.kernel_rows(acts)
    rows: dict[str, list[dict]] = {}
    for r in b["kernel_breakdown"]:
        rows.setdefault(r["name"], []).append(r)
    assert {n: sum(r["count"] for r in rs) for n, rs in rows.items()} == {n: w["count"] for n, w in want.items()}
    assert {n: round(sum(r["total_us"] for r in rs) * 1e3) for n, rs in rows.items()} == {n: w["total"] for n, w in want.items()}
    single = {n: rs[0] for n, rs in rows.items() if len(rs) == 1}  # a name of one kind: its own percentiles
    assert {n: (r["max_us"] * 1e3, r["p50_us"] * 1e3, r["p95_us"] * 1e3) for n, r in single.items()} == {
        n: approx((want[n]["max"], want[n]["p50"], want[n]["p95"])) for n in single
    }
    parts = oracle.busy_parts(acts)
    assert round(b["busy_partition"]["busy_us"] * 1e3) == sum(parts.values())
    assert {p["part"]: round(p["us"] * 1e3) for p in b["busy_partition"]["parts"]} == parts


def test_class_totals_from_the_hand_labels(traced):
    _, _, raw, b = traced
    if not _available(b["kernel_classes"]):
        return
    want = oracle.class_totals(oracle.scope(raw))
    got = {c["class"]: round(c["total_us"] * 1e3) for c in b["kernel_classes"]}
    assert {c: got.get(c, 0) for c in want} == want


def test_launch_delays_queue_and_outliers(traced):
    _, _, raw, b = traced
    ls = b["launch_stats"]
    want = oracle.launches(oracle.scope(raw), raw)
    if not _available(ls):
        assert want["with_launch"] == 0
        return
    got = {
        "activities": ls["activities"],
        "with_launch": ls["with_launch"],
        "median_delay_ns": ls["median_delay_us"] * 1e3,
        "p95_delay_ns": ls["p95_delay_us"] * 1e3,
        "max_delay_ns": ls["max_delay_us"] * 1e3,
        "negative_delays": ls["negative_delays"],
        "launch_bound": ls["launch_bound_kernels"]["count"],
        "queued": ls["queued"],
        "median_idle_delay_ns": None if ls["median_idle_delay_us"] is None else ls["median_idle_delay_us"] * 1e3,
        "delay_outliers": ls["delay_outliers"],
        "runtime_outliers": ls["runtime_outliers"],
        "queue_depth": ls["queue_depth"],
    }
    floats = ("median_delay_ns", "p95_delay_ns", "max_delay_ns", "median_idle_delay_ns")
    assert {k: v for k, v in got.items() if k not in floats} == {k: v for k, v in want.items() if k not in floats}
    assert {k: got[k] for k in floats} == {k: (None if want[k] is None else approx(want[k])) for k in floats}


def test_launched_rows_match(traced):
    ts, rank, raw, _ = traced
    table = ts.table(rank)
    device = (table["device"] >= 0) | table.mask_kind(*DEVICE_KINDS)
    assert int(_launched(table, device).sum()) == sum(a.launch is not None for a in raw.acts)


def test_breakdowns_reuse_the_analysis_plan(traced):
    """analyze() hands the comm analyzer's step plans to the breakdowns instead of planning the re-stepped tables
    again: the same figures as planning them again."""
    ts, rank, _, _ = traced
    try:
        a = analyze(ts)
    except EmptyWindowError:
        return
    assert a.breakdowns[rank].to_dict() == rank_breakdowns(a.traces, rank, BreakdownOptions()).to_dict()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=40), min_size=1, max_size=12),
    st.sampled_from([50, 95, 99, 1, 0, 100, 33.3]),
    st.booleans(),
)
def test_group_percentiles_equal_numpy_per_group(groups, q, as_float):
    dtype = np.float64 if as_float else np.int64
    values = np.concatenate([np.sort(np.array(g, dtype)) for g in groups])
    codes = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    starts, counts = group_bounds(codes)
    got = group_percentiles(values, starts, counts, q)
    want = [float(np.percentile(np.array(g, dtype), q)) for g in groups]
    assert got.tolist() == want  # bit for bit, not approximately


@given(st.lists(st.integers(-(2**62), 2**62), max_size=60))
def test_unique_equals_numpy(xs):
    a = np.array(xs, np.int64)
    assert np.array_equal(unique(a), np.unique(a)) and unique(a).dtype == np.unique(a).dtype
