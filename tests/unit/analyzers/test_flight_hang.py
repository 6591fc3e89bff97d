"""`tracekit hang`: the injected rank of each real gloo hang is the one named, and hand-built rings with a known
answer for every rule (missing, ahead, mismatch by majority, late past the timeout, absent dump, NCCL states,
a wrapped ring, point-to-point entries, membership and dimensions)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.helpers.data import DATA
from tests.helpers.flight import T0, dump, entry, ring, write_dumps
from tracekit.analyzers.flight.hang import analyze_hang
from tracekit.cli import cli
from tracekit.loader.flight import FlightReadOptions, read_flight_dir

REAL = DATA / "flight-recorder"
INJECTED = {"gloo-ok": [], "gloo-skip": [2], "gloo-sleep": [1], "gloo-size": [2]}


def _hang(path, *args) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["hang", str(path), "--format", "json", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, json.loads(res.output)


@pytest.mark.parametrize("case", sorted(INJECTED))
@pytest.mark.parametrize("form", ["", "json", "stacks"])
def test_real_hangs_name_exactly_the_injected_rank(case, form):
    code, d = _hang(REAL / case / form if form else REAL / case)
    assert [s["rank"] for s in d["suspect_ranks"]] == INJECTED[case]
    assert code == (1 if INJECTED[case] else 0) and d["verdict"] == ("hang" if INJECTED[case] else "consistent")
    (mesh,) = [g for g in d["groups"] if g["desc"] == "mesh_dp"]
    assert mesh["dimension"] == "dp" and mesh["members"] == [0, 1, 2]
    assert mesh["membership"] == ("observed" if form else "run.json")  # the collector's run.json lists the group
    assert mesh["completed"] is None  # gloo records no completion


def test_real_skip_and_size_say_which_collective():
    _, skip = _hang(REAL / "gloo-skip")
    (g,) = skip["groups"]
    assert (g["reached_seq"], g["next_seq"], g["entered_next"], g["missing_next"]) == (3, 4, [0, 1], [2])
    assert [e["kind"] for e in skip["evidence"]] == ["missing"] and skip["mismatches"] == []
    _, size = _hang(REAL / "gloo-size")
    (m,) = size["mismatches"]
    assert (m["seq"], m["field"], m["odd_ranks"], m["majority"]) == (3, "input_sizes", [2], "[[8]]")
    assert m["by_rank"] == {"0": "[[8]]", "1": "[[8]]", "2": "[[12]]"}
    _, sleep = _hang(REAL / "gloo-sleep")
    (late,) = sleep["evidence"]
    assert late["kind"] == "late" and late["seq"] == 3 and late["ranks"] == [1] and "2.000 s timeout" in late["text"]


def _report(tmp_path, per_rank, **opts):
    where = tmp_path / f"d{len(list(tmp_path.iterdir()))}"
    write_dumps(where, per_rank)
    return analyze_hang(read_flight_dir(where, FlightReadOptions(**opts))).to_dict()


def _suspects(d) -> list[tuple[int, int]]:
    return [(s["rank"], s["directness"]) for s in d["suspect_ranks"]]


def test_a_minority_missing_is_named_first(tmp_path):
    d = _report(tmp_path, {0: dump(ring(5)), 1: dump(ring(5)), 2: dump(ring(4)), 3: dump(ring(5))})
    assert _suspects(d) == [(2, 1)] and d["groups"][0]["missing_next"] == [2]


def test_one_rank_ahead_of_all_others_is_the_odd_one(tmp_path):
    d = _report(tmp_path, {0: dump(ring(5)), 1: dump(ring(4)), 2: dump(ring(4))})
    assert _suspects(d) == [(0, 2), (1, 5), (2, 5)]
    assert [e["kind"] for e in d["evidence"]] == ["ahead", "behind"]


def test_two_ranks_two_answers_both_named(tmp_path):
    d = _report(tmp_path, {0: dump(ring(3)), 1: dump([*ring(2), entry(3, dtype="BFloat16")])})
    (m,) = d["mismatches"]
    assert m["field"] == "input_dtypes" and m["odd_ranks"] == [0, 1] and m["majority"] == ""
    assert _suspects(d) == [(0, 2), (1, 2)]


def test_the_majority_decides_even_when_rank_0_is_the_odd_one(tmp_path):
    odd = [*ring(2), entry(3, sizes=((16,),)), *ring(4)[3:]]
    d = _report(tmp_path, {0: dump(odd), 1: dump(ring(4)), 2: dump(ring(4))})
    (m,) = d["mismatches"]
    assert m["odd_ranks"] == [0] and _suspects(d) == [(0, 2)]


def test_op_mismatch_and_later_mismatches_counted(tmp_path):
    other = [*ring(2), entry(3, "all_gather"), entry(4, "all_gather")]
    d = _report(tmp_path, {0: dump(ring(4)), 1: dump(ring(4)), 2: dump(other)})
    (m,) = d["mismatches"]
    assert (m["seq"], m["field"], m["odd_ranks"], m["later_mismatched"]) == (3, "op", [2], 1)


def test_all_to_all_sizes_may_differ(tmp_path):
    a2a = lambda n: [entry(1, "all_to_all", sizes=((n,),))]
    d = _report(tmp_path, {0: dump(a2a(8)), 1: dump(a2a(12))})
    assert d["mismatches"] == [] and d["verdict"] == "consistent"


def test_an_absent_dump_is_a_suspect(tmp_path):
    d = _report(tmp_path, {0: dump(ring(3)), 2: dump(ring(3))})
    assert _suspects(d) == [(1, 4)] and d["absent_ranks"] == [1] and d["groups"][0]["absent"] == [1]
    d = _report(tmp_path, {0: dump(ring(3)), 1: dump(ring(3))}, world_size=3)
    assert _suspects(d) == [(2, 4)]


def test_late_arrival_only_past_the_timeout(tmp_path):
    slow = [*ring(2), entry(3, created_ns=T0 + 3_000_000 + 2_500_000_000), entry(4, created_ns=T0 + 9_000_000_000)]
    fine = [*ring(2), entry(3, created_ns=T0 + 3_000_000 + 1_500_000_000), *ring(4)[3:]]
    d = _report(tmp_path, {0: dump(ring(4)), 1: dump(slow), 2: dump(fine)})
    assert _suspects(d) == [(1, 3)]
    (late,) = d["evidence"]
    assert late["seq"] == 3 and "2.500 s after rank 0" in late["text"]


def _nccl(seq, state, **kw):
    return entry(seq, backend="nccl", state=state, **kw)


def test_nccl_states_completed_and_not_started(tmp_path):
    done = lambda n: [_nccl(s, "completed", time_discovered_completed_ns=T0 + s) for s in range(1, n + 1)]
    stuck = [*done(2), _nccl(3, "scheduled", retired=False)]
    started = [*done(2), _nccl(3, "started", time_discovered_started_ns=T0 + 9, retired=False)]
    d = _report(tmp_path, {0: dump(started), 1: dump(started), 2: dump(stuck)})
    (g,) = d["groups"]
    assert g["completed"] == [] and g["status"] == "hang" and g["reached_seq"] == 3
    assert _suspects(d) == [(2, 3)] and d["evidence"][0]["kind"] == "not_started"
    d = _report(tmp_path, {0: dump(done(3)), 1: dump(done(3))})
    assert d["verdict"] == "consistent" and d["groups"][0]["completed"] == [0, 1]


def test_a_wrapped_ring_without_the_group_is_unknown_not_missing(tmp_path):
    tp = ("1", "mesh_tp")
    cfg = {"1": {"name": "1", "desc": "mesh_tp", "ranks": "[0, 1]"}}
    wrapped = [entry(s, record_id=100 + s) for s in range(1, 6)]  # ring starts at record 101: older entries dropped
    fresh = [entry(s, record_id=s - 1) for s in range(1, 6)]  # record 0 onwards: nothing dropped
    with_tp = [entry(1, pg=tp, record_id=0), *[entry(s, record_id=s) for s in range(1, 6)]]
    d = _report(tmp_path, {0: dump(wrapped, pg_config=cfg), 1: dump(with_tp, pg_config=cfg)})
    tp_state = next(g for g in d["groups"] if g["desc"] == "mesh_tp")
    assert tp_state["members"] == [0, 1] and tp_state["last_seq_by_rank"] == {"0": -1, "1": 1}
    assert d["verdict"] == "consistent"
    d = _report(tmp_path, {0: dump(fresh, pg_config=cfg), 1: dump(with_tp, pg_config=cfg)})
    assert _suspects(d) == [(0, 1)]  # the same ring from record 0 never entered mesh_tp: missing


def test_config_membership_finds_a_member_that_never_entered(tmp_path):
    cfg = {
        "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"},
        "1": {"name": "1", "desc": "TENSOR_MODEL_PARALLEL_GROUP", "ranks": "[0, 2]"},
    }
    tp = [entry(1, pg=("1", "TENSOR_MODEL_PARALLEL_GROUP"), record_id=10)]
    d = _report(
        tmp_path, {0: dump([*ring(2), *tp], pg_config=cfg), 1: dump(ring(2), pg_config=cfg), 2: dump(ring(2), pg_config=cfg)}
    )
    tp_state = next(g for g in d["groups"] if g["name"] == "1")
    assert (tp_state["dimension"], tp_state["membership"], tp_state["members"]) == ("tp", "pg_config", [0, 2])
    assert tp_state["missing_next"] == [2] and _suspects(d) == [(2, 1)]


def test_point_to_point_entries_are_no_collectives(tmp_path):
    p2p = [entry(2, "send", is_p2p=True, p2p_seq_id=1, record_id=5)]
    d = _report(tmp_path, {0: dump([*ring(2), *p2p]), 1: dump(ring(2))})
    assert d["verdict"] == "consistent" and d["groups"][0]["last_p2p_seq_by_rank"] == {"0": 1}


def test_dim_map_and_formats(tmp_path):
    write_dumps(tmp_path / "d", {0: dump(ring(3, pg=("9", "my_group"))), 1: dump(ring(2, pg=("9", "my_group")))})
    code, d = _hang(tmp_path / "d", "--dim-map", "my_*=cp")
    assert code == 1 and d["groups"][0]["dimension"] == "cp"
    res = CliRunner().invoke(cli, ["hang", str(tmp_path / "d"), "--format", "markdown"])
    assert res.exit_code == 1 and "**rank 1**" in res.output and "| 9 (my\\_group) |" not in res.output
    res = CliRunner().invoke(cli, ["hang", str(tmp_path / "d"), "--width", "200"])
    assert res.exit_code == 1 and "rank 1" in res.output and "never reached collective 3" in res.output
    out = tmp_path / "r.json"
    res = CliRunner().invoke(cli, ["hang", str(tmp_path / "d"), "--format", "json", "--out", str(out)])
    assert res.exit_code == 1 and json.loads(out.read_text())["suspect_ranks"][0]["rank"] == 1


def test_errors_are_one_line(tmp_path):
    for args in ([str(tmp_path / "nope")], [str(tmp_path)]):
        res = CliRunner().invoke(cli, ["hang", *args])
        assert res.exit_code in (2, 3) and "Traceback" not in res.output


def test_nccl_entries_retired_uncompleted_are_listed_as_timed_out(tmp_path):
    done = [_nccl(s, "completed", time_discovered_completed_ns=T0 + s) for s in (1, 2)]
    gave_up = [*done, _nccl(3, "started", time_discovered_started_ns=T0 + 9, retired=True)]
    d = _report(tmp_path, {0: dump(gave_up), 1: dump(gave_up)})
    (out,) = [e for e in d["evidence"] if e["kind"] == "timed_out"]
    assert out["seq"] == 3 and out["ranks"] == [0, 1] and d["suspect_ranks"] == []  # a group fact, no suspect
    assert d["groups"][0]["status"] == "hang" and d["groups"][0]["completed"] == []
