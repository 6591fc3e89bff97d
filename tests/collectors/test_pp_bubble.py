"""The bubble figure from hand-built summaries with known answers: stage membership, median and range over
steps, incomplete steps left out, and no figure for a run without a pipeline; pp shapes that do not split are
usage errors."""

from __future__ import annotations

import pytest

from tracekit.collectors.workloads.bubble import analytical_bubble, pipeline_shape, stage_bubbles


def _summary(pp, m, ranks, world=None):
    """``ranks``: {rank: [(wall_us, compute_us, complete), ...]}."""
    model = {"seq": 8} if m is None else {"seq": 8, "microbatches": m}
    return {
        "run": {"world_size": world or len(ranks), "layout": {"pp": pp}, "manifest": {"model": model}},
        "ranks": [
            {"rank": r, "steps": [{"wall_us": w, "compute_us": c, "complete": ok} for w, c, ok in steps]}
            for r, steps in ranks.items()
        ],
    }


def test_analytical_is_the_1f1b_formula():
    assert analytical_bubble(2, 4) == pytest.approx(1 / 5)
    assert analytical_bubble(4, 8) == pytest.approx(3 / 11)
    assert analytical_bubble(1, 8) == 0.0


def test_stages_from_ranks_with_median_and_range():
    # pp=2 over 4 ranks: ranks 0, 1 are stage 0 (its dp pair), 2, 3 stage 1
    s = _summary(
        2,
        4,
        {
            0: [(100, 80, True), (100, 70, True)],
            1: [(100, 90, True)],
            2: [(200, 100, True), (100, 50, False)],
            3: [(100, 75, True)],
        },
    )
    b0, b1 = stage_bubbles(s)
    assert (b0.stage, b0.ranks, b0.steps) == (0, (0, 1), 3)
    assert b0.measured == pytest.approx(0.2) and (b0.lowest, b0.highest) == pytest.approx((0.1, 0.3))
    assert (b1.stage, b1.ranks, b1.steps) == (1, (2, 3), 2)  # the incomplete step is left out
    assert b1.measured == pytest.approx((0.5 + 0.25) / 2)
    assert b1.analytical == pytest.approx(0.2) and b1.delta == pytest.approx(0.175)
    assert b1.to_dict()["ranks"] == [2, 3]


def test_no_pipeline_no_figure():
    assert stage_bubbles(_summary(1, 4, {0: [(100, 80, True)]})) == ()
    assert pipeline_shape(_summary(2, None, {0: [(100, 80, True)], 1: [(100, 80, True)]})) is None
    assert stage_bubbles({"run": {}, "ranks": []}) == ()


@pytest.mark.parametrize(
    "args, what",
    [
        (["--layers", "3"], "--layers 3 must divide by --pp 2"),
        (["--batch", "6", "--microbatches", "4"], "--dp x --microbatches (1 x 4)"),
    ],
)
def test_pp_shapes_that_do_not_split_are_usage_errors(tmp_path, args, what):
    from click.testing import CliRunner

    from tracekit.cli import cli

    result = CliRunner().invoke(cli, ["run", "--workload", "pp", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2 and what in result.output, result.output


def test_1f1b_schedule():
    from tracekit.collectors.workloads.pipeline import schedule

    assert schedule(0, 2, 4) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)]
    assert schedule(1, 2, 4) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]
    assert schedule(0, 4, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]  # fewer microbatches than warm-up slots
    for p, m in ((4, 8), (3, 2), (2, 1)):
        for s in range(p):
            acts, live, peak = schedule(s, p, m), set(), 0
            assert sorted(acts) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
            for kind, i in acts:
                if kind == "F":
                    live.add(i)
                else:
                    live.remove(i)  # a backward only after its forward
                peak = max(peak, len(live))
            assert peak == min(p - s, m)
