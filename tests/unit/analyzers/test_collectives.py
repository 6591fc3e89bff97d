"""Cross-rank matching, clock offsets, wait/transfer, stragglers and bandwidth on hand-built ranks."""

import math

import pytest

from tests.helpers.tables import ev, table, traceset
from tracekit.analyzers import analyze
from tracekit.analyzers.comm.collectives import bus_factor
from tracekit.model.traceset import RankInfo, RunMetadata, TraceSet

SHIFT = 1_000_000_000  # rank 1's clock runs 1 s ahead
TP = dict(pg_name="1", pg_desc="tracekit:tp", pg_ranks="[0, 1]", group_size=2)


def ar(ts, dur, seq, nbytes, off=0):
    return ev("COMM", ts + off, dur, 0, stream=99, coll_op="all_reduce", seq=seq, in_bytes=nbytes, out_bytes=nbytes, **TP)


def ranks(shift=SHIFT):
    r0 = [
        ev("STEP", 0, 1000, step=0, stream=1),
        ar(0, 100, 0, 1000),
        ar(200, 100, 1, 1000),
        ar(400, 100, 2, 1000),
        ev("COMM", 600, 50, 0, stream=98, coll_op="send", dst_rank=1, in_bytes=64, **TP),
    ]
    r1 = [
        ev("STEP", shift, 1000, step=0, stream=1),
        ar(10, 90, 0, 1000, shift),
        ar(250, 50, 1, 1000, shift),
        ar(400, 100, 2, 2000, shift),  # size differs: reported, never paired
        ev("COMM", 620 + shift, 30, 0, stream=98, coll_op="recv", src_rank=0, in_bytes=64, **TP),
    ]
    return traceset({0: table(r0), 1: table(r1, shuffle_seed=3)}, device_type="cpu")


def by_key(d):
    return {(c["rank"], c["op"], c["seq"]): c for c in d["collectives"]}


def test_wait_transfer_offsets_and_stragglers():
    d = analyze(ranks()).to_dict()
    (o0, o1) = d["clock_offsets"]
    assert (o0["rank"], o0["offset_us"]) == (0, 0.0)
    assert o1["rank"] == 1 and o1["offset_us"] * 1e3 == SHIFT and o1["matched"] == 2
    # causality bounds: max(start1 - end0) = -50 ns, min(end1 - start0) = 100 ns around the shift
    assert o1["spread_us"] * 1e3 == pytest.approx(100) and o1["method"] == "median-ends"
    c = by_key(d)
    ns = lambda x: round(x * 1e3)
    assert [ns(c[(0, "all_reduce", s)]["wait_us"]) for s in (0, 1)] == [10, 50]
    assert [ns(c[(1, "all_reduce", s)]["wait_us"]) for s in (0, 1)] == [0, 0]
    assert [ns(c[(r, "all_reduce", 1)]["transfer_us"]) for r in (0, 1)] == [50, 50]
    assert ns(c[(0, "send", -1)]["wait_us"]) == 20 and ns(c[(1, "recv", -1)]["transfer_us"]) == 30
    assert c[(0, "all_reduce", 0)]["algbw_gbps"] == pytest.approx(1000 / 90)  # bytes/ns = GB/s
    assert c[(0, "all_reduce", 0)]["busbw_gbps"] == pytest.approx(1000 / 90 * bus_factor("all_reduce", 2))
    assert c[(0, "all_reduce", 2)]["wait_us"] is None, "a size mismatch is never paired"
    assert any("size differs" in w for w in d["warnings"])
    (s,) = d["stragglers"]
    assert (s["rank"], s["last_arrivals"], s["instances"]) == (1, 3, 3)
    assert s["mean_lateness_us"] * 1e3 == pytest.approx(80 / 3) and s["total_caused_wait_us"] * 1e3 == pytest.approx(80)
    assert [r["wait_us"] * 1e3 for r in d["ranks"]] == pytest.approx([80, 0])
    (dim,) = [x for x in d["by_dimension"] if x["op"] == "all_reduce"]
    assert dim["dimension"] == "tp" and dim["count"] == 6 and dim["wait_us"] * 1e3 == pytest.approx(60)


def test_cross_rank_numbers_do_not_depend_on_the_clock_shift():
    a, b = analyze(ranks(shift=0)).to_dict(), analyze(ranks()).to_dict()
    keys = ("wait_us", "transfer_us", "skew_us", "algbw_gbps", "busbw_gbps")
    for k, ca in by_key(a).items():
        assert {x: by_key(b)[k][x] for x in keys} == {x: ca[x] for x in keys}
    assert a["stragglers"] == b["stragglers"]


def test_order_matching_without_seq_and_dim_override():
    rows = lambda off, late: [
        ev(
            "COMM",
            off + t + late * (i == 1),
            100 - late * (i == 1),
            0,
            stream=9,
            coll_op="all_gather",
            in_bytes=10,
            out_bytes=20,
            pg_name="7",
            pg_desc="mesh_dp_shard",
            pg_ranks="[0, 1]",
            group_size=2,
        )
        for i, t in enumerate((0, 500))
    ]
    d = analyze(
        traceset({0: table(rows(0, 0)), 1: table(rows(0, 40))}, device_type="cuda"), dim_map=("mesh_dp_*=fsdp",)
    ).to_dict()
    c = by_key(d)
    assert round(c[(0, "all_gather", -1)]["wait_us"] * 1e3) in (0, 40)
    assert sorted(round(x["wait_us"] * 1e3) for x in d["collectives"]) == [0, 0, 0, 40]
    assert {x["dimension"] for x in d["by_dimension"]} == {"fsdp"}
    assert d["collectives"][0]["bytes"] == 20  # nccl-tests size of all_gather is the output


def test_bus_factors_are_nccl_tests():
    assert bus_factor("all_reduce", 4) == 1.5 and bus_factor("all_gather", 4) == 0.75
    assert bus_factor("reduce_scatter", 8) == 7 / 8 and bus_factor("all_to_all", 2) == 0.5
    assert bus_factor("send", 2) == 1 and bus_factor("broadcast", 4) == 1 and bus_factor("gather", 4) == 0.75
    # not defined: a group of unknown size or of one rank, an op without a bus model -- never 0
    assert all(math.isnan(bus_factor(op, n)) for op, n in (("all_reduce", 0), ("all_to_all", 1), ("x", 2), ("dispatch", 8)))


def _world(n_ranks, world_size, **group):
    """One all-reduce (1 MB; transfer 1000 ns: the last rank arrives at 0) and one all-to-all per rank, in a
    trace that names no process group: the loader put them on the world group (pg "0", "default_pg")."""
    g = dict(pg_name="0", pg_desc="default_pg", **group)
    rows = lambda r: [
        ev("STEP", 0, 10_000, step=0, stream=1),
        ev("COMM", -r * 10, 1000 + r * 10, 0, stream=9, coll_op="all_reduce", in_bytes=10**6, out_bytes=10**6, **g),
        ev("COMM", 5000, 1000, 0, stream=9, coll_op="all_to_all", in_bytes=192, out_bytes=192, **g),
    ]
    tables = {r: table(rows(r)) for r in range(n_ranks)}
    infos = {r: RankInfo(rank=r, world_size=world_size or -1, device_type="cuda") for r in tables}
    return analyze(TraceSet(tables, infos, RunMetadata(world_size=world_size)), align_clocks=False).to_dict()


@pytest.mark.parametrize(
    "n_ranks, world, group, n",
    [
        (8, 8, {}, 8),  # no pg_config: the assumed world group's size
        (2, 8, {}, 8),  # two of the eight ranks loaded: still the world's 8
        (2, 8, {"group_size": 4}, 4),  # the trace's own group size wins
        (3, 8, {"pg_ranks": "[0, 1, 2, 5]"}, 4),  # else its member ranks
        (3, 0, {}, 3),  # no world size known: the ranks it was matched across (a lower bound)
    ],
)
def test_busbw_takes_the_right_group_size(n_ranks, world, group, n):
    d = _world(n_ranks, world, **group)
    rows = [c for c in d["collectives"] if c["rank"] == 0]
    ar, a2a = (next(c for c in rows if c["op"] == op) for op in ("all_reduce", "all_to_all"))
    assert ar["algbw_gbps"] == pytest.approx(10**6 / 1000)  # bytes/ns: hand-computed
    assert ar["busbw_gbps"] == pytest.approx(10**6 / 1000 * 2 * (n - 1) / n)
    assert a2a["busbw_gbps"] == pytest.approx(192 / 1000 * (n - 1) / n)


def test_busbw_is_null_never_zero_without_a_group_size():
    """One rank matched with itself has no peer: no transfer, so no bandwidth at all -- and no 0.00."""
    d = _world(1, 0)
    assert all(c["busbw_gbps"] is None for c in d["collectives"])
    assert all(x["busbw_gbps"] is None for x in d["by_dimension"])
