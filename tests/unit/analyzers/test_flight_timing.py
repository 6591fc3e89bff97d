"""Flight Recorder timing against an oracle that reads the raw entries itself (plain loops over the dicts the
dumps were written from; no tracekit code): hand-built NCCL-like rings with known enqueue, start and duration
times, and the real gloo dumps."""

from __future__ import annotations

import json
import pickle
import statistics

import pytest
from click.testing import CliRunner

from tests.helpers.data import DATA
from tests.helpers.flight import T0, dump, entry, write_dumps
from tracekit.analyzers.flight.timing import analyze_timing
from tracekit.cli import cli
from tracekit.loader.flight import read_flight_dir

MS = 1_000_000
LATE = {0: [0, 0, 3, 0], 1: [2, 0, 0, 0], 2: [0, 5, 1, 7]}  # ms each rank is late to collective 1..4
QUEUE = {0: 0.2, 1: 0.5, 2: 0.1}  # ms from enqueue to the discovered start
TRANSFER_MS = 1.0


def _ring() -> dict[int, list[dict]]:
    """Every rank's entries: collective s enqueued at s*10 ms + LATE, started QUEUE later, all ending together
    TRANSFER_MS after the last enqueue (so the late rank has the shortest duration)."""
    out: dict[int, list[dict]] = {r: [] for r in LATE}
    for s in range(1, 5):
        created = {r: T0 + s * 10 * MS + LATE[r][s - 1] * MS for r in LATE}
        end = max(created.values()) + int(TRANSFER_MS * MS)
        for r in LATE:
            started = created[r] + int(QUEUE[r] * MS)
            out[r].append(
                entry(
                    s,
                    backend="nccl",
                    pg=("0", "TENSOR_MODEL_PARALLEL_GROUP"),
                    created_ns=created[r],
                    state="completed",
                    time_discovered_started_ns=started,
                    time_discovered_completed_ns=end,
                    duration_ms=(end - started) / MS,
                )
            )
    return out


def _oracle(per_rank: dict[int, list[dict]]) -> dict:
    by_seq: dict[int, dict[int, dict]] = {}
    for r, es in per_rank.items():
        for e in es:
            by_seq.setdefault(e["collective_seq_id"], {})[r] = e
    wait, skews, last_count, intervals, gaps = {r: 0 for r in per_rank}, [], {r: 0 for r in per_rank}, [], []
    shortest = {r: 0 for r in per_rank}
    for ranks in by_seq.values():
        created = {r: e["time_created_ns"] for r, e in ranks.items()}
        last = max(created.values())
        for r, c in created.items():
            wait[r] += last - c
        skews.append(last - min(created.values()))
        last_count[max(created, key=created.get)] += 1
        if all(e.get("duration_ms") is not None for e in ranks.values()):
            shortest[min(ranks, key=lambda r: ranks[r]["duration_ms"])] += 1
    for es in per_rank.values():
        for a, b in zip(es, es[1:]):
            intervals.append(b["time_created_ns"] - a["time_created_ns"])
            if a["time_discovered_completed_ns"]:
                gaps.append(b["time_created_ns"] - a["time_discovered_completed_ns"])
    return {
        "wait": wait,
        "skew": statistics.mean(skews),
        "last": last_count,
        "interval": statistics.mean(intervals),
        "gap": statistics.mean(gaps) if gaps else None,
        "shortest": shortest,
    }


@pytest.fixture
def nccl(tmp_path):
    per_rank = _ring()
    write_dumps(tmp_path / "d", {r: dump(es) for r, es in per_rank.items()})
    return analyze_timing(read_flight_dir(tmp_path / "d")).to_dict(), _oracle(per_rank)


def test_waits_skews_intervals_and_gaps_match_the_oracle(nccl):
    d, o = nccl
    (dim,) = d["dimensions"]
    assert dim["dimension"] == "tp" and dim["instances"] == dim["matched"] == 4
    assert dim["wait_by_rank_us"] == {str(r): pytest.approx(w / 1e3) for r, w in o["wait"].items()}
    assert dim["wait_us"] == pytest.approx(sum(o["wait"].values()) / 1e3)
    assert dim["mean_skew_us"] == pytest.approx(o["skew"] / 1e3)
    assert dim["mean_interval_us"] == pytest.approx(o["interval"] / 1e3)
    assert dim["mean_gap_us"] == pytest.approx(o["gap"] / 1e3)
    assert d["recorded"] == {"arrival": True, "queue": True, "duration": True, "completion": True}


def test_queueing_and_transfer_come_from_the_recorded_times(nccl):
    d, _ = nccl
    (dim,) = d["dimensions"]
    assert dim["mean_queue_us"] == pytest.approx(statistics.mean(QUEUE.values()) * 1e3, rel=1e-6)
    assert dim["mean_transfer_us"] == pytest.approx(TRANSFER_MS * 1e3, rel=1e-6)


def test_stragglers_by_arrival_and_by_the_inversion_rule_agree_with_the_oracle(nccl):
    d, o = nccl
    assert {s["rank"]: s["last_arrivals"] for s in d["stragglers"]} == {r: n for r, n in o["last"].items() if n}
    assert d["stragglers"][0]["rank"] == 2  # late by 5 and 7 ms: the most waiting caused
    assert {i["rank"]: i["shortest_count"] for i in d["inversion"]} == {r: n for r, n in o["shortest"].items() if n}
    assert o["shortest"] == o["last"]  # the rule itself: the last to arrive shows the shortest duration


def test_real_gloo_dumps_have_arrivals_only():
    raw = {r: pickle.loads((DATA / "flight-recorder" / "gloo-sleep" / f"_dump_{r}").read_bytes()) for r in range(3)}
    o = _oracle({r: [e for e in d["entries"] if e["process_group"][1] == "mesh_dp"] for r, d in raw.items()})
    d = analyze_timing(read_flight_dir(DATA / "flight-recorder" / "gloo-sleep")).to_dict()
    (dim,) = d["dimensions"]
    assert d["recorded"] == {"arrival": True, "queue": False, "duration": False, "completion": False}
    assert dim["mean_queue_us"] is None and dim["mean_duration_us"] is None and dim["mean_transfer_us"] is None
    assert dim["wait_by_rank_us"] == {str(r): pytest.approx(w / 1e3, abs=1e-3) for r, w in o["wait"].items()}
    assert d["stragglers"][0]["rank"] == 1 and d["inversion"] == []  # the sleeper, 3 s late to collective 3
    assert d["collectives"][0]["seq"] == 3 and d["collectives"][0]["last_rank"] == 1


def test_analyze_routes_a_folder_of_dumps_and_keeps_its_formats(tmp_path):
    folder = DATA / "flight-recorder" / "gloo-skip"
    res = CliRunner().invoke(cli, ["analyze", str(folder), "--format", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["schema"] == "tracekit.flight_timing/1" and d["kineto"] is None and d["dimensions"][0]["dimension"] == "dp"
    for fmt, needle in (("table", "stragglers (by arrival)"), ("markdown", "## Flight Recorder timing")):
        res = CliRunner().invoke(cli, ["analyze", str(folder), "--format", fmt])
        assert res.exit_code == 0 and needle in res.output
    res = CliRunner().invoke(cli, ["analyze", str(folder / "json"), "--format", "json"])  # JSON dumps are no traces
    assert res.exit_code == 0 and json.loads(res.output)["schema"] == "tracekit.flight_timing/1"
    res = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--flight"])
    assert res.exit_code == 3 and "no Flight Recorder dumps" in res.output
