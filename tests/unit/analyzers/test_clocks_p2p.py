"""Clock offsets over send/recv pairs: a pipeline's stages share no collective, only sends one way and
receives the other. Hand-built stages with known per-rank clock skews: the estimate recovers each skew within
its claimed spread, collectives keep their say where they link ranks, and one-way or contradictory pairs are
refused or flagged."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from tracekit.analyzers.comm.clocks import estimate_offsets


class Run:
    """Instances on one true clock; ``skew`` is added to a rank's times as its recorded clock would."""

    def __init__(self, skew: dict[int, int]):
        self.skew, self.rows, self.match = skew, [], itertools.count()

    def _row(self, match, op, rank, start, end):
        k = self.skew.get(rank, 0)
        self.rows.append(dict(match=match, op=op, rank=rank, start_ns=start + k, end_ns=end + k))

    def p2p(self, src, dst, send, recv):
        """A matched pair: (start, end) of the send on src and of the receive on dst, true times."""
        m = next(self.match)
        self._row(m, "send", src, *send)
        self._row(m, "recv", dst, *recv)

    def coll(self, op, spans: dict[int, tuple[int, int]]):
        m = next(self.match)
        for r, (s, e) in spans.items():
            self._row(m, op, r, s, e)

    def frame(self):
        return pd.DataFrame(self.rows)


def pipeline(
    stages: int,
    skew: dict[int, int],
    microbatches: int = 3,
    jitter: int = 40,
    run: Run | None = None,
    rank=lambda s: s,
    t: int = 0,
) -> Run:
    """1F1B-like traffic: activations s -> s+1, gradients s+1 -> s (stage s on rank ``rank(s)``). A receive is
    posted before the send (it waits) and ends ``jitter`` ns after or before the send's end, as gloo span
    ends do."""
    run = run or Run(skew)
    for mb in range(microbatches):
        for s in range(stages - 1):
            run.p2p(rank(s), rank(s + 1), send=(t + 500, t + 900), recv=(t + 100, t + 900 + (jitter if mb % 2 else -jitter)))
            t += 2000
        for s in reversed(range(stages - 1)):
            run.p2p(rank(s + 1), rank(s), send=(t + 300, t + 700), recv=(t, t + 700 + (-jitter if mb % 2 else jitter)))
            t += 2000
    return run


@pytest.mark.parametrize(
    "stages,skew",
    [
        (2, {1: 3_000_000_000}),
        (2, {1: -7_123}),
        (2, {0: 250_000}),
        (4, {2: 1_000_000}),
        (4, {1: -5_000, 3: 40_000_000}),
    ],
)
def test_stage_skew_recovered_within_the_spread(stages, skew):
    out, warnings = estimate_offsets(pipeline(stages, skew).frame(), list(range(stages)))
    assert sorted(out) == list(range(stages)) and not warnings
    for r in range(1, stages):
        true = skew.get(r, 0) - skew.get(0, 0)
        o = out[r]
        assert abs(o.offset_ns - true) <= o.spread_ns, (r, o)
        assert o.method.startswith("p2p-") and o.matched == 6
        # the bounds: a send runs 400 ns, receive ends 40 ns either side of it: hi = min(end_r - start_s) =
        # 400 - 40, lo = max(start_s - end_r) = -(400 - 40); end differences -40, +40, -40 both ways: median
        # -40, spread max(-40 + 360, 360 + 40) = 400 per link, summed along the chain
        assert o.spread_ns == 400 * r
    # the estimate moves exactly with the skew, so every cross-rank figure is unchanged by it
    base, _ = estimate_offsets(pipeline(stages, {}).frame(), list(range(stages)))
    for r in range(stages):
        assert out[r].offset_ns - base[r].offset_ns == skew.get(r, 0) - skew.get(0, 0)


def test_estimate_is_the_clipped_median_of_end_differences():
    run = Run({1: 10_000})
    run.p2p(0, 1, send=(0, 100), recv=(50, 150))  # θ <= 150 - 0; end difference +50
    run.p2p(1, 0, send=(1000, 1100), recv=(900, 1130))  # θ >= 1000 - 1130 = -130; end difference -30
    run.p2p(0, 1, send=(2000, 2100), recv=(1990, 2020))  # θ <= 20; end difference -80
    out, _ = estimate_offsets(run.frame(), [0, 1])
    o = out[1]
    # median(+50, -30, -80) = -30, inside [-130, 20]; spread max(100, 50) = 100
    assert (o.offset_ns, o.spread_ns, o.method, o.matched) == (10_000 - 30, 100, "p2p-median-ends", 3)


def test_collectives_keep_their_offsets_and_pairs_join_the_stages():
    """pp=2 x dp=2: ranks 0,1 are stage 0 (an all_reduce), 2,3 stage 1; sends link 0<->2 and 1<->3."""
    skew = {1: 1_000, 2: 2_000_000, 3: 2_000_500}
    run = pipeline(2, skew, rank=lambda s: 2 * s)  # link 0 <-> 2, spread 400 ns
    pipeline(2, skew, jitter=90, run=run, rank=lambda s: 2 * s + 1, t=20_000)  # link 1 <-> 3, also 400 ns
    run.coll("all_reduce", {0: (50_000, 51_000), 1: (50_200, 51_010)})
    run.coll("all_reduce", {2: (50_000, 51_000), 3: (50_100, 51_020)})
    df = run.frame()
    out, warnings = estimate_offsets(df, [0, 1, 2, 3])
    assert not warnings and sorted(out) == [0, 1, 2, 3]
    coll_only, _ = estimate_offsets(df[df["op"] == "all_reduce"], [0, 1, 2, 3])
    assert sorted(coll_only) == [0, 1]  # collectives alone reach only stage 0
    assert out[1] == coll_only[1] and not out[1].method.startswith("p2p")
    # stage 1 is reached over the tighter link (0 <-> 2, 400 ns) rather than 1 <-> 3 (400 ns on top of rank 1's own spread);
    # rank 3 then chains from rank 2 over stage 1's all_reduce
    assert out[2].method.startswith("p2p-") and out[2].spread_ns == 400
    assert not out[3].method.startswith("p2p") and out[3].spread_ns > 400
    for r in (1, 2, 3):
        assert abs(out[r].offset_ns - skew[r]) <= out[r].spread_ns, (r, out[r])


def test_one_way_pairs_align_nothing():
    run = Run({1: 1_000_000_000})
    run.p2p(0, 1, send=(600, 650), recv=(620, 650))
    out, warnings = estimate_offsets(run.frame(), [0, 1])
    assert sorted(out) == [0] and len(warnings) == 1 and "one way only" in warnings[0]


def test_contradictory_pairs_fall_back_with_a_warning():
    run = Run({})
    run.p2p(0, 1, send=(1000, 1100), recv=(900, 950))  # the receive ends before the send starts: θ <= -50
    run.p2p(1, 0, send=(2000, 2100), recv=(1900, 1950))  # and the other way: θ >= 50
    out, warnings = estimate_offsets(run.frame(), [0, 1])
    assert out[1].method == "p2p-unbounded" and out[1].spread_ns == 100
    assert len(warnings) == 1 and "send/recv timings contradict" in warnings[0]


def test_a_consistent_link_is_preferred_to_a_contradictory_one():
    """Stage 1 is ranks 1 and 2 (an all_reduce); rank 0 links to 1 by pairs whose bounds cross by 100 ns and to
    2 by consistent pairs (spread 400 ns): stage 1 is reached over rank 2, and no contradiction is reported."""
    skew = {1: 5_000, 2: 5_000}
    run = pipeline(2, skew, rank=lambda s: 2 * s)
    run.p2p(0, 1, send=(91_000, 91_100), recv=(90_900, 90_950))
    run.p2p(1, 0, send=(92_000, 92_100), recv=(91_900, 91_950))
    run.coll("all_reduce", {1: (95_000, 96_000), 2: (95_000, 96_000)})
    out, warnings = estimate_offsets(run.frame(), [0, 1, 2])
    assert out[2].method.startswith("p2p-") and out[2].spread_ns == 400 and not out[1].method.startswith("p2p")
    assert not warnings and all(abs(out[r].offset_ns - skew[r]) <= out[r].spread_ns for r in (1, 2))
