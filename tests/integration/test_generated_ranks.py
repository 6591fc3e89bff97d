"""Generated multi-rank runs (tests/helpers/multirank.py) against what was generated: the process groups as
Megatron-Core writes them, every collective matched across its group, each rank's wait and transfer as the files
say (an oracle that reads the raw JSON with exact decimals, sharing no code with tracekit), the clock offsets
within their claimed spread of the true host offsets, and the slowed rank found as the straggler."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from decimal import Decimal

import pytest

from tests.helpers.multirank import generate
from tests.helpers.rank_layout import Layout
from tracekit.analyzers.files import analyze_files
from tracekit.loader.loading import LoadOptions

LAYOUT = Layout(tp=2, pp=2, dp=4)  # 16 ranks, 4 hosts of 4


def _run(tmp_path_factory, name: str, **kw) -> tuple[str, dict]:
    out = str(tmp_path_factory.mktemp(name))
    return out, generate(out, LAYOUT, gpus_per_node=4, workers=1, **kw)


@pytest.fixture(scope="module")
def same_clock(tmp_path_factory):
    return _run(tmp_path_factory, "same-clock", clock_offset_us=0.0)


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    return _run(tmp_path_factory, "skewed", clock_offset_us=5_000.0, seed=3)


def _docs(d: str) -> dict[int, dict]:
    out = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".json") and not name.startswith("."):
            with open(os.path.join(d, name)) as fh:
                doc = json.load(fh, parse_float=Decimal)
            out[doc["distributedInfo"]["rank"]] = doc
    return out


def _ns(us: Decimal) -> int:
    return int(us * 1000)


NCCL_OP = {"allreduce": "all_reduce", "broadcast": "broadcast", "send": "send", "recv": "recv"}  # torch's -> tracekit's


def oracle(d: str) -> dict[tuple[int, str, int], tuple[int, int]]:
    """(rank, op, start ns since the epoch) -> (wait ns, transfer ns), from the collective kernels of the raw files
    (``baseTimeNanoseconds`` + ``ts``, exact decimals): a collective is
    keyed by (group, Seq), a send/recv by (group, src, dst, order); the last member to start sets the transfer."""
    members: dict[tuple, list] = defaultdict(list)
    for rank, doc in _docs(d).items():
        order: dict[tuple, int] = defaultdict(int)
        base = int(doc.get("baseTimeNanoseconds", 0))
        kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})]
        for e in sorted(kernels, key=lambda e: e["ts"]):
            a = e["args"]
            if "Seq" in a:
                key: tuple = ("c", a["Process Group Name"], a["Seq"])
            else:
                pair = ("p", a["Process Group Name"], a["Src Rank"], a["Dst Rank"])
                key = (*pair, order[pair])
                order[pair] += 1
            start = base + _ns(e["ts"])
            members[key].append((rank, NCCL_OP[a["Collective name"]], start, start + _ns(e["dur"])))
    out = {}
    for rows in members.values():
        assert len({r for r, *_ in rows}) == len(rows) >= 2  # every collective on two ranks or more, each once
        last = max(s for _, _, s, _ in rows)
        for rank, op, start, end in rows:
            out[(rank, op, start)] = (last - start, end - last)
    return out


def test_process_groups_are_megatron_shaped(same_clock):
    """pg_config lists the rank's groups; a group's name is the same on every member; tp groups are contiguous,
    dp groups stride tp, pp groups stride tp x dp."""
    d, _ = same_clock
    seen: dict[str, tuple] = {}
    for rank, doc in _docs(d).items():
        di = doc["distributedInfo"]
        assert di["world_size"] == 16 and di["backend"] == "nccl"
        by_desc = {}
        for g in di["pg_config"]:
            assert rank in g["ranks"] and g["pg_size"] == len(g["ranks"])
            assert seen.setdefault(g["pg_name"], (g["pg_desc"], tuple(g["ranks"]))) == (g["pg_desc"], tuple(g["ranks"]))
            by_desc[g["pg_desc"]] = g["ranks"]
        tp0, dp0, pp0 = rank - rank % 2, rank % 2 + 8 * (rank // 8), rank % 8
        assert by_desc["TENSOR_MODEL_PARALLEL_GROUP"] == [tp0, tp0 + 1]
        assert by_desc["DATA_PARALLEL_GROUP"] == [dp0, dp0 + 2, dp0 + 4, dp0 + 6]
        assert by_desc["PIPELINE_MODEL_PARALLEL_GROUP"] == [pp0, pp0 + 8]
        assert by_desc["default_pg"] == list(range(16))


def test_wait_and_transfer_equal_the_files(same_clock):
    """One clock on every host (no offsets to estimate): every instance matched, each rank's wait and transfer
    exactly the raw files' (last member's start - own start, own end - last member's start)."""
    d, record = same_clock
    expected = oracle(d)
    result = analyze_files([d], options=LoadOptions(cache=False), executor="serial", progress=False, align_clocks=False)
    inst = result.comm.instances
    assert len(inst) == len(expected) == 16 * record["collectives_per_rank"]
    got = {
        (int(r), str(op), int(s)): (int(w), int(t))
        for r, op, s, w, t in zip(inst["rank"], inst["op"], inst["start_ns"], inst["wait_ns"], inst["transfer_ns"])
    }
    assert got == expected
    dims = {(d["dimension"], d["op"]) for d in result.to_dict()["by_dimension"]}
    assert dims == {("tp", "all_reduce"), ("tp", "broadcast"), ("dp", "all_reduce"), ("pp", "send"), ("pp", "recv")}


def test_clock_offsets_within_their_spread_and_the_straggler_found(skewed):
    """Hosts 5 ms apart: each estimated offset is within its claimed spread of the generated host offset, and the
    rank whose compute was slowed is the straggler that made its peers wait longest."""
    d, record = skewed
    result = analyze_files([d], options=LoadOptions(cache=False), executor="serial", progress=False)
    truth = {r: record["clock_offsets_us"][str(r - r % 4)] * 1000 for r in range(16)}
    offsets = {o.rank: o for o in result.comm.cross.offsets}
    assert sorted(offsets) == list(range(16))
    assert any(abs(t) > 1e6 for t in truth.values())  # offsets worth estimating
    for r, o in offsets.items():
        assert abs(o.offset_ns - truth[r]) <= o.spread_ns + 1, (r, o, truth[r])
    assert result.comm.cross.stragglers[0].rank == record["stragglers"][0]
