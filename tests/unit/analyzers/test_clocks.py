"""Clock offsets: causality bounds hold the estimate when collective ends jitter (gloo on a loaded host)."""

import pandas as pd
import pytest

from tracekit.analyzers.comm.clocks import estimate_offsets


def frame(instances, shift=0):
    rows = []
    for match, ((s0, e0), (s1, e1)) in enumerate(instances):
        rows.append(dict(match=match, op="all_reduce", rank=0, start_ns=s0, end_ns=e0))
        rows.append(dict(match=match, op="all_reduce", rank=1, start_ns=s1 + shift, end_ns=e1 + shift))
    return pd.DataFrame(rows)


JITTERY = [((0, 1000), (0, 100)), ((5000, 6000), (5000, 5100)), ((9000, 9100), (9000, 10000))]


@pytest.mark.parametrize("shift", [0, 3_000_000_000, -7_123])
def test_median_of_ends_is_clipped_into_the_causality_interval(shift):
    out, warnings = estimate_offsets(frame(JITTERY, shift), [0, 1])
    o = out[1]
    # end differences -900, -900, +900: median -900; bounds: lo = max(0-1000, 5000-6000, 9000-9100) = -100,
    # hi = min(100-0, 5100-5000, 10000-9000) = 100; so the estimate is -100 and the error bound 200 ns
    assert o.offset_ns == shift - 100 and o.spread_ns == 200 and o.method == "clipped" and o.matched == 3
    assert abs(o.offset_ns - shift) <= o.spread_ns  # the true offset is within the spread
    assert not warnings


def test_contradictory_bounds_fall_back_with_a_warning():
    # rank 1 ends before rank 0 starts in one instance, and after in another: no single offset explains both
    out, warnings = estimate_offsets(frame([((0, 10), (100, 110)), ((1000, 1010), (900, 905))]), [0, 1])
    assert out[1].method == "unbounded" and warnings and "contradict" in warnings[0]


def test_offsets_chain_through_a_shared_peer():
    rows = [
        dict(match=0, op="all_gather", rank=0, start_ns=0, end_ns=100),
        dict(match=0, op="all_gather", rank=1, start_ns=1000, end_ns=1100),
        dict(match=1, op="all_gather", rank=1, start_ns=2000, end_ns=2100),
        dict(match=1, op="all_gather", rank=2, start_ns=7000, end_ns=7100),
    ]
    out, _ = estimate_offsets(pd.DataFrame(rows), [0, 1, 2])
    assert [out[r].offset_ns for r in (0, 1, 2)] == [0, 1000, 6000]


def _two_ranks(shift):
    """The JITTERY instances as two ranks' all-reduces in one step, rank 1's clock ``shift`` ns ahead."""
    from tests.helpers.tables import ev, table, traceset

    g = dict(pg_name="1", pg_desc="tracekit:dp", pg_ranks="[0, 1]", group_size=2, coll_op="all_reduce", in_bytes=8)
    rows = {0: [ev("STEP", 0, 20_000, step=0, stream=1)], 1: [ev("STEP", shift, 20_000, step=0, stream=1)]}
    for seq, ((s0, e0), (s1, e1)) in enumerate(JITTERY):
        rows[0].append(ev("COMM", s0, e0 - s0, 0, stream=9, seq=seq, **g))
        rows[1].append(ev("COMM", s1 + shift, e1 - s1, 0, stream=9, seq=seq, **g))
    return traceset({r: table(v) for r, v in rows.items()}, device_type="cuda")


@pytest.mark.parametrize("shift", [0, 150])
def test_an_offset_inside_its_error_bound_is_not_applied(shift):
    """Estimates -100 and +50 ns, both within the 200 ns spread: not applied, the cross-rank figures are those
    of the raw times, and the output says the clocks agree, once."""
    from tracekit.analyzers import analyze
    from tracekit.reports.terminal import render_text

    d = analyze(_two_ranks(shift)).to_dict()
    o = d["clock_offsets"][1]
    assert (o["applied"], o["offset_us"], o["spread_us"]) == (False, 0.0, 0.2)
    assert o["estimate_us"] * 1e3 == pytest.approx(shift - 100)
    # raw times: rank 1 starts `shift` late, so rank 0 waits min(shift, its duration: 1000, 1000, 100 ns)
    waits = sorted(round(c["wait_us"] * 1e3) for c in d["collectives"])
    assert waits == sorted([0, 0, 0, min(shift, 1000), min(shift, 1000), min(shift, 100)])
    text = render_text(d, width=120)
    assert text.count("clocks agree within ± 0.2 µs") == 1 and text.count("agree within") == 1, text
    assert "largest correction" not in text


def test_an_offset_beyond_its_error_bound_is_applied():
    from tracekit.analyzers import analyze
    from tracekit.reports.terminal import render_text

    d = analyze(_two_ranks(3_000_000)).to_dict()
    o = d["clock_offsets"][1]
    assert o["applied"] and o["offset_us"] * 1e3 == pytest.approx(3_000_000 - 100) == o["estimate_us"] * 1e3
    text = render_text(d, width=120)
    assert text.count("largest correction rank 1") == 1 and "agree within" not in text
