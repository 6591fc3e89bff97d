"""The numpy kernel groups, launch statistics and launched-row test agree exactly with their previous pandas /
per-group implementations (tests/helpers/breakdown_oracle.py) on every trace in tests/data, the breakdowns that
analyze() gives the comm analyzer's step plans with those planned afresh, and the grouped percentile with
``np.percentile`` group by group."""

import glob

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import breakdown_oracle as oracle
from tests.helpers.data import DATA
from tracekit.analyzers import analyze
from tracekit.analyzers.arrays import group_bounds, group_percentiles, unique
from tracekit.analyzers.breakdowns.device_scope import scope
from tracekit.analyzers.breakdowns.kernel_classes import ClassRuleSet
from tracekit.analyzers.breakdowns.kernels import kernel_breakdown, name_labels
from tracekit.analyzers.breakdowns.launches import launch_stats
from tracekit.analyzers.breakdowns.rank_breakdowns import BreakdownOptions, rank_breakdowns
from tracekit.analyzers.comm.steps import _launched
from tracekit.errors import EmptyWindowError
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import DEVICE_KINDS

TRACES = sorted(glob.glob(str(DATA / "kineto-gpu*" / "*.json.gz")))


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.rsplit("/", 1)[-1])
def traced(request):
    ts = load([request.param], options=LoadOptions(cache=False), executor="serial")
    (rank,) = ts.ranks
    return ts.table(rank), ts.info(rank), ts


def test_kernel_groups_match_the_pandas_version(traced):
    table, info, _ = traced
    sc = scope(table, None, info)
    rules = ClassRuleSet()
    new, _ = kernel_breakdown(sc, info.rank, rules)
    by_name, by_class, by_short = oracle.kernel_groups(sc, rules)
    assert new.rows == by_name and new.classes == by_class and new.short_names == by_short
    assert [np.array(x, object).tolist() for x in name_labels(sc.table, sc.rows, rules)] == [
        x.tolist() for x in oracle.name_labels(sc.table, sc.rows, rules)
    ]


def test_launch_stats_match_the_pandas_version(traced):
    table, info, _ = traced
    sc = scope(table, None, info)
    rules = ClassRuleSet()
    new, old = launch_stats(sc, info.rank, rules), oracle.launch_frame(sc, rules)
    assert (new is None) == (old is None)
    if new is None:
        return
    activities, frame = old
    assert new.to_frame().equals(frame)
    assert list(new.to_frame().dtypes) == list(frame.dtypes)
    assert new.to_dict() == oracle.launch_dict(activities, frame)
    assert new.outliers().equals(oracle._outliers(frame, 100_000, 50_000, 20))
    few = launch_stats(sc, info.rank, rules, 1_000, 2_000, 3)
    assert few.to_dict() == oracle.launch_dict(activities, frame, 1_000, 2_000, 3)


def test_launched_rows_match(traced):
    table, _, _ = traced
    device = (table["device"] >= 0) | table.mask_kind(*DEVICE_KINDS)
    assert np.array_equal(_launched(table, device), oracle.launched(table, device))


def test_breakdowns_reuse_the_analysis_plan(traced):
    """analyze() hands the comm analyzer's step plans to the breakdowns instead of planning the re-stepped tables
    again: the same figures as planning them again."""
    _, info, ts = traced
    try:
        a = analyze(ts)
    except EmptyWindowError:
        return
    assert a.breakdowns[info.rank].to_dict() == rank_breakdowns(a.traces, info.rank, BreakdownOptions()).to_dict()


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
