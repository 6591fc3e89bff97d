"""The what-if table's questions and answers on hand-built traces whose answers are known by construction
(tests/unit/analyzers/test_critical_path.py builds them)."""

import pytest

from tests.unit.analyzers.test_critical_path import one_rank, two_ranks
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.whatif_table import obvious_questions, questions, slowest_rank


def test_two_ranks_questions_and_known_answers():
    ts = two_ranks()
    g = build_graph(ts)
    # host time inside the step, counted by hand from the events: rank 0 100+10+10 before its first sync, 10 of
    # sync return, 390 of H0, 10+10, 10 of sync return, 190 to the step's end; rank 1 400 of H1, 10 + 5 of return,
    # 5 + 10 before the second sync, 5 of return, 495 of H2
    r, factor, why = slowest_rank(g)
    assert r == 1 and factor == pytest.approx(740 / 930) and why.startswith("rank 1 has 0.9 µs")
    qs = questions(g)
    assert [q for q, _ in qs] == ["tp communication free", "tp at 2x bandwidth", "rank 1's extra host time gone"]
    assert [s for _, s in qs][:2] == [("comm:tp=0",), ("comm:tp=0.5",)]
    t = obvious_questions(ts, g)
    assert t.steps == 1 and t.replay_error == 0.0
    got = {a.question: (a.measured_ns, a.predicted_ns) for a in t.answers}
    assert got["no change (identity replay)"] == (1800, 1800)
    assert got["tp communication free"] == (1800, 1335)  # test_cross_rank_whatif derives 1335 by hand
    assert 1335 < got["tp at 2x bandwidth"][1] < 1800
    assert got["rank 1's extra host time gone"][1] < 1800
    d = t.to_dict()
    assert d["answers"][1]["saving_share"] == pytest.approx(1 - 1335 / 1800)
    assert d["answers"][1]["specs"] == ["comm:tp=0"]


def test_one_rank_has_no_slowest_rank_and_no_comm_questions():
    g = build_graph(one_rank())
    assert slowest_rank(g) is None and questions(g) == []
    t = obvious_questions(one_rank(), g)
    assert [a.question for a in t.answers] == ["no change (identity replay)"]
    assert any("one rank" in n for n in t.notes) and any("no collective" in n for n in t.notes)
