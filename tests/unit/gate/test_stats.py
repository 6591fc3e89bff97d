import numpy as np
import pytest

from tracekit.gate.stats import Stat, stat_over_ranks


def test_median_of_rank_medians_and_spread_of_all_steps():
    st = stat_over_ranks({0: [1.0, 2.0, 100.0], 1: [3.0, 4.0, 5.0]})
    assert st.median == 3.0  # rank medians 2 and 4; the 100 µs outlier step moves nothing
    assert (st.lo, st.hi, st.samples) == (1.0, 100.0, 6)
    everything = [1.0, 2.0, 100.0, 3.0, 4.0, 5.0]
    assert st.q1 == pytest.approx(np.percentile(everything, 25))
    assert st.q3 == pytest.approx(np.percentile(everything, 75))


def test_none_values_are_skipped_and_all_none_is_unavailable():
    assert stat_over_ranks({0: [None, 4.0], 1: [None]}).median == 4.0
    assert stat_over_ranks({0: [None], 1: []}) is None


def test_single_value_spread_says_its_basis():
    st = Stat.single(5.0)
    assert (st.median, st.lo, st.hi, st.samples) == (5.0, 5.0, 5.0, 1)
    assert st.spread_text(str) == "run total"
    assert stat_over_ranks({0: [1.0, 3.0]}).spread_text(lambda v: f"{v:g}") == "steps 1..3"
