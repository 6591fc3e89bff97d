"""Process-group member ranks: parsed once by the loader into RankInfo.group_ranks, read as tuples downstream."""

from __future__ import annotations

import gzip
import json

import pytest

import tracekit
from tests.helpers.data import gpu_trace
from tracekit.model.traceset import RankInfo, parse_ranks


@pytest.mark.parametrize(
    "text,ranks",
    [
        ("[0, 1]", (0, 1)),
        ("(0,1)", (0, 1)),
        ("0,1,2", (0, 1, 2)),
        ("0 1", (0, 1)),
        ("", ()),
        ("[]", ()),
        ("[0, -1, 4294967296, 7]", (0, 7)),
        ("x", ()),
    ],
)
def test_one_parser_for_every_spelling(text, ranks):
    assert parse_ranks(text) == ranks
    assert parse_ranks(None) == () and parse_ranks(5) == ()


def test_the_loader_parses_each_groups_ranks_once_and_the_summary_reads_them():
    path = gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")
    ts = tracekit.load(path)
    info = ts.info(0)
    raw = json.loads(gzip.decompress(open(path, "rb").read()))
    texts = {
        str((e.get("args") or {}).get("Process Group Ranks"))
        for e in raw["traceEvents"]
        if (e.get("args") or {}).get("Process Group Ranks") is not None
    }
    assert texts and set(info.group_ranks) == texts  # every distinct text of the trace, no other
    assert all(info.group_ranks[t] == parse_ranks(t) for t in texts)
    groups = tracekit.analyze(ts).to_dict()["by_process_group"]
    assert groups and all(g["ranks"] == [0, 1] for g in groups)


def test_a_hand_built_rank_info_parses_on_demand():
    assert RankInfo(0, 2).members("[0, 1]") == (0, 1)
    assert RankInfo(0, 2, group_ranks={"g": (3, 4)}).members("g") == (3, 4)  # the loader's parse wins
