"""The comm rule file and the cache metadata as formats Structs: a good file's values reach the loader, each
wrong field is one line naming the file, entry and field, and the cache metadata keeps every RankInfo field."""

from __future__ import annotations

import dataclasses
import json

import pyarrow.parquet as pq
import pytest

from tests.helpers.data import gpu_trace
from tracekit.errors import ConfigError
from tracekit.formats.cache_meta import CachedRankInfo, decode_meta
from tracekit.formats.rules import RuleEntry
from tracekit.loader.cache import cache_key, cache_path, write_signed
from tracekit.loader.classify import DEFAULT_RULES, CommRule, load_rules_toml
from tracekit.loader.loading import LoadOptions, load_file
from tracekit.model.traceset import ProcessGroup, RankInfo


def test_a_rule_file_reaches_the_rule_table(tmp_path):
    p = tmp_path / "rules.toml"
    p.write_text(
        'title = "ours"\n\n[[comm]]\npattern = "^my_allgather"\nlibrary = "custom"\nop = "all_gather"\n\n'
        '[[comm]]\npattern = "myreduce"\n'
    )
    rules = load_rules_toml(str(p))
    assert rules.rules[:2] == (CommRule("^my_allgather", "custom", "all_gather"), CommRule("myreduce", "user", ""))
    assert rules.rules[2:] == DEFAULT_RULES  # the user's rules go first, the defaults stay
    got = rules.match(["my_allgather_kernel<8>", "void myreduce_f32", "ncclDevKernel_AllGather", "gemm"])
    assert [r.library if r else None for r in got] == ["custom", "user", "nccl", None]


@pytest.mark.parametrize(
    "text,message",
    [
        ('[[comm]]\npattern = "x"\nop = 3\n', "entry 1: field 'op' must be a string, not int"),
        (
            '[[comm]]\npattern = "x"\n[[comm]]\npattern = "y"\nlibrary = ["a"]\n',
            "entry 2: field 'library' must be a string, not list",
        ),
        ("[[comm]]\npattern = 1979-05-27\n", "entry 1, field 'pattern': the pattern must be a string, not date"),
        ('[comm]\npattern = "x"\n', "'comm' must be an array of tables ([[comm]]), not a dict"),
    ],
)
def test_each_wrong_field_is_one_line(tmp_path, text, message):
    p = tmp_path / "rules.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_rules_toml(str(p))
    assert str(err.value) == (f"{p}: [[comm]] {message}" if message.startswith("entry") else f"{p}: {message}")


def test_rule_entry_is_the_documented_table():
    assert RuleEntry.__struct_fields__ == ("pattern", "library", "op")


def test_the_cache_metadata_keeps_every_rank_info_field():
    """A RankInfo field the Struct did not declare would be dropped from every cache hit: the two must agree."""
    info = RankInfo(
        rank=1,
        world_size=2,
        backend="nccl",
        source="r1.json",
        device_type="cuda",
        process_groups=(ProcessGroup("0", "default_pg", (0, 1), 2, "nccl", "dp"),),
        device_properties=({"id": 0, "name": "H100"},),
        base_time_ns=17,
        trace_id="t",
        nccl_version="2.21",
        host_name="h",
        generation={"flows": "ac2g"},
        warnings=("w",),
        truncated=True,
        last_complete_ns=99,
        activities_whole=True,
    )
    assert set(CachedRankInfo.__struct_fields__) == set(info.to_dict())
    meta = decode_meta({"stamp": {"size": 1}, "rules": "k", "strings": ["a"], "info": json.loads(json.dumps(info.to_dict()))})
    assert meta.info.rank_info() == info
    assert {f.name for f in dataclasses.fields(RankInfo)} - set(info.to_dict()) == {"group_ranks"}  # derived


def test_a_crafted_cache_entry_warning_names_the_field(tmp_path):
    """Before: 'unreadable: ValueError' (or KeyError); now the Struct's path of the field that is wrong."""
    src = tmp_path / "rank0.json.gz"
    src.write_bytes(open(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), "rb").read())
    opts = LoadOptions(cache=True, cache_dir=str(tmp_path / "c"))
    load_file(str(src), opts)
    target = cache_path(str(src), opts.cache_dir)
    table = pq.read_table(target)
    meta = json.loads(table.schema.metadata[b"tracekit"])
    meta["info"]["process_groups"] = [{"ranks": [0, "one"]}]
    # signed with the user's key, as the loader signs: behind the signature, the Struct still checks every field
    write_signed(target, table, json.dumps(meta).encode(), cache_key())
    _, info = load_file(str(src), opts)
    (note,) = [w for w in info.warnings if "ignored the cache entry" in w]
    assert "$.info.process_groups[0].ranks[1]" in note and "reloaded the trace" in note
    assert info.process_groups and all(isinstance(r, int) for g in info.process_groups for r in g.ranks)
