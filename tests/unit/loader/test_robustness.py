"""Bad traces beyond the basics (test_bad_input.py): duplicates, unknown categories, numbers no column can hold,
huge strings, impossible or mixed ranks, and untrusted names reaching the terminal. Each case: a one-line
error or warning naming the file, exit code 3 from the CLI for errors, never a wrapped-around number."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tests.helpers.data import gpu_trace
from tracekit.cli import cli
from tracekit.errors import InputLimitError, MissingRankError, TraceFormatError
from tracekit.loader.loading import LoadOptions, load, load_file
from tracekit.model.events import EventKind as K

HOSTILE = "ncclDevKernel_AllReduce\x1b]0;pwned\x07\x1b[2J"


def _load(path, **kw):
    return load_file(str(path), LoadOptions(cache=False, **kw))


def kernel(ts=10, dur=5, name="ncclDevKernel_AllReduce_Sum_f32", **args):
    a = {
        "Collective name": "allreduce",
        "In msg nelems": 4,
        "Out msg nelems": 4,
        "dtype": "Float",
        "Group size": 2,
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "correlation": 1,
    }
    a.update(args)
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": a}


def step(n=1, ts=0, dur=100):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def write(path, events, rank=None, world=2, **header):
    doc = {"traceEvents": events, **header}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": world, "backend": "nccl"}
    path.write_text(json.dumps(doc))
    return path


# -- duplicated events ----------------------------------------------------------------------------------------
def test_exact_duplicate_events_are_dropped_with_a_count(tmp_path):
    src = gpu_trace("rocm-mi250-minitoy.json.gz")
    doc = json.loads(gzip.open(src).read())
    full, _ = _load(src)
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    doc["traceEvents"] += xs[:7] + xs[:2]  # seven events twice, two of them three times
    path = tmp_path / "dup.json"
    path.write_text(json.dumps(doc))
    table, info = _load(path)
    assert len(table) == len(full)
    for col in ("ts_ns", "dur_ns", "kind", "correlation"):  # the same rows as the clean trace, in its order
        assert (np.sort(table[col]) == np.sort(full[col])).all()
    assert any("dropped 9 exact duplicate events" in w and str(path) in w for w in info.warnings)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_duplicate_rows_match_a_brute_force_oracle(seed):
    """The hash-and-sort search against the obvious one (a set of whole rows, first copy kept), on a real table
    whose rows are drawn with repeats (and without any, and with hash collisions forced by equal columns)."""
    from tracekit.loader.checks import duplicate_rows
    from tracekit.model.events import COLUMNS

    full, _ = _load(gpu_trace("rocm-mi250-minitoy.json.gz"))
    rng = np.random.default_rng(seed)
    for index in (rng.integers(0, len(full), 3 * len(full)), rng.permutation(len(full)), np.zeros(5, np.int64)):
        table = full.select(index)
        device = table["device"].copy()  # copies that differ only in a column the hash leaves out: not duplicates
        device[rng.random(len(device)) < 0.3] += 1
        table = table.with_columns(device=device)
        seen, want = set(), np.zeros(len(table), bool)
        rows = zip(*(table[k].tolist() for k in COLUMNS))
        for i, row in enumerate(rows):
            want[i] = row in seen
            seen.add(row)
        assert (duplicate_rows(table) == want).all()


def test_real_traces_have_no_duplicates_or_unknown_categories():
    for name in ("allreduce-broadcast-2rank-rank0", "ddp-allreduce-2rank-rank1-oldformat", "rocm-mi250-minitoy"):
        _, info = _load(gpu_trace(name + ".json.gz"))
        assert not any("duplicate" in w or "categories" in w for w in info.warnings), info.warnings


def test_same_time_different_event_is_not_a_duplicate(tmp_path):
    a, b = kernel(), kernel(correlation=2)
    table, info = _load(write(tmp_path / "t.json", [step(), a, b]))
    assert table.mask_kind(K.COMM).sum() == 2 and not info.warnings


# -- unknown categories -----------------------------------------------------------------------------------------
def test_unknown_categories_are_counted_as_other_with_a_warning(tmp_path):
    odd = {"ph": "X", "cat": "mystery_cat", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
    table, info = _load(write(tmp_path / "t.json", [step(), odd, dict(odd, ts=2), kernel()]))
    assert (table.decode("cat_id") == "mystery_cat").sum() == 2
    assert (table["kind"][table.decode("cat_id") == "mystery_cat"] == K.OTHER).all()
    (w,) = [w for w in info.warnings if "categories" in w]
    assert "'mystery_cat' ×2" in w and str(tmp_path / "t.json") in w


# -- NaN and huge numbers ---------------------------------------------------------------------------------------
# 2**61 and 2**62: found by test_fuzz_loader on the loader before this fix (bytes wrapped to 0 or negative)
@pytest.mark.parametrize(
    "args",
    [
        {"In msg nelems": 10**30},
        {"In msg nelems": str(10**30)},
        {"In msg nelems": 2**62},
        {"In msg nelems": 2**61},
        {"In msg nelems": -7},
    ],
)
def test_huge_sizes_are_absent_never_wrapped(tmp_path, args):
    table, _ = _load(write(tmp_path / "t.json", [step(), kernel(**args)]))
    i = np.flatnonzero(table.mask_kind(K.COMM))[0]
    # absent (-1), never int64 wrap-around: 2**62 elements x 4 bytes would wrap to 0
    assert table["in_nelems"][i] == -1 and table["in_bytes"][i] == -1
    assert table["out_bytes"][i] == 16  # the sane field next to it is kept


# Group size 2**31: found by test_fuzz_loader (OverflowError traceback from the int32 column)
@pytest.mark.parametrize(
    "args",
    [{"Group size": 10**12}, {"Group size": 2**31}, {"Seq": "99999999999999999999999"}, {"Seq": 10**25}, {"device": 70000}],
)
def test_out_of_range_ids_are_absent(tmp_path, args):
    table, _ = _load(write(tmp_path / "t.json", [step(), kernel(**args)]))
    i = np.flatnonzero(table.mask_kind(K.COMM))[0]
    assert table["group_size"][i] in (2, -1) and table["seq"][i] == -1 and table["device"][i] in (0, -1)
    if "device" in args:
        assert table["device"][i] == -1  # not 70000 wrapped to int16 (4464)


def test_huge_times_are_dropped_with_a_warning(tmp_path):
    base = 1_700_000_000_000_000_000  # epoch ns, as Kineto writes it
    events = [step(), kernel(), kernel(ts=8.9e15, correlation=2), kernel(dur=8.9e15, correlation=3)]
    table, info = _load(write(tmp_path / "t.json", events, baseTimeNanoseconds=base))
    assert table.mask_kind(K.COMM).sum() == 1
    assert (table["ts_ns"] >= base).all() and (table.end_ns > table["ts_ns"] - 1).all()
    assert any("dropped 2 events whose time or end lies beyond" in w for w in info.warnings)


@pytest.mark.parametrize(
    "header,event,message",
    [
        ({"baseTimeNanoseconds": 10**20}, kernel(), "baseTimeNanoseconds"),
        ({}, step(n=10**20), "out of range"),
        ({}, None, "not valid JSON"),  # NaN literal, as Python's json.dumps writes it
    ],
)
def test_corrupt_numbers_are_one_line_errors(tmp_path, header, event, message):
    path = tmp_path / "t.json"
    if event is None:
        path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1}]}')
    else:
        write(path, [event], **header)
    with pytest.raises(TraceFormatError, match=message) as err:
        _load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


# -- a single huge string -----------------------------------------------------------------------------------------
def test_a_huge_string_is_refused_and_a_flag_raises_the_limit(tmp_path):
    path = write(tmp_path / "t.json", [step(), kernel(name="ncclDevKernel_" + "A" * 3_000_000)])
    with pytest.raises(InputLimitError, match="--max-string-bytes"):
        _load(path, max_string_bytes=1_000_000)
    res = CliRunner().invoke(cli, ["info", str(path), "--no-cache", "--format", "json"])
    assert res.exit_code == 3 and "--max-string-bytes" in res.output and len(res.output) < 500
    res = CliRunner().invoke(cli, ["info", str(path), "--no-cache", "--format", "json", "--max-string-bytes", "4000000"])
    assert res.exit_code == 0, res.output


# -- ranks: impossible, missing, duplicated, mixed runs ---------------------------------------------------------
@pytest.mark.parametrize("rank,world", [(5, 2), (-5, 2), (2**40, 2**41)])
def test_impossible_rank_numbers(tmp_path, rank, world):
    path = write(tmp_path / "t.json", [step(), kernel()], rank=rank, world=world)
    with pytest.raises(MissingRankError, match=f"rank {rank} of world size {world}"):
        load(str(path), options=LoadOptions(cache=False), executor="serial")


def _run_dir(tmp_path, name, ranks, world=2, t0=0.0):
    d = tmp_path / name
    d.mkdir()
    for r, w, t in zip(
        ranks, world if isinstance(world, list) else [world] * len(ranks), t0 if isinstance(t0, list) else [t0] * len(ranks)
    ):
        write(d / f"r{r}-{len(list(d.iterdir()))}.json", [step(ts=t), kernel(ts=t + 10)], rank=r, world=w)
    return d


def _cli(*args):
    return CliRunner().invoke(cli, [*args, "--no-cache", "--executor", "serial"])


def _flat(text: str) -> str:
    """Output with the terminal's line wrapping undone."""
    return " ".join(text.split())


def test_cli_mixed_world_sizes_exit_3(tmp_path):
    res = _cli("info", str(_run_dir(tmp_path, "mixed", [0, 1], world=[2, 4])))
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert res.exit_code == 3 and len(lines) == 1 and "world sizes [2, 4]" in lines[0] and "mixed" in lines[0]


def test_cli_duplicate_rank_exit_3(tmp_path):
    res = _cli("analyze", str(_run_dir(tmp_path, "dup", [0, 0])))
    assert res.exit_code == 3 and "rank 0 appears twice" in res.output and "Traceback" not in res.output


def test_cli_missing_ranks_warn(tmp_path):
    res = _cli("info", str(_run_dir(tmp_path, "miss", [0, 3], world=8)))
    assert res.exit_code == 0, res.output
    assert "ranks 1, 2, 4, 5, 6, 7 of 8 have no trace" in _flat(res.output)


def test_cli_times_far_apart_warn(tmp_path):
    # 2 hours apart (in µs): not clock skew between hosts but two different runs
    res = _cli("info", str(_run_dir(tmp_path, "far", [0, 1], t0=[1.0e12, 1.0e12 + 7.2e9])))
    assert res.exit_code == 0, res.output
    assert "rank 1 starts 7200 s after rank 0: these traces look like different runs" in _flat(res.output)


def test_trace_ids_differing_per_rank_are_not_evidence_of_mixing(tmp_path):
    d = _run_dir(tmp_path, "ids", [0, 1])
    for i, f in enumerate(sorted(d.iterdir())):  # Kineto writes a distinct trace_id per rank
        doc = json.loads(f.read_text())
        f.write_text(json.dumps(dict(doc, trace_id=f"ID{i}")))
    ts = load(str(d), options=LoadOptions(cache=False), executor="serial")
    assert ts.ranks == [0, 1] and not any("different runs" in w for w in ts.metadata.warnings)


# -- untrusted names reaching a terminal ----------------------------------------------------------------------------
def test_terminal_escape_sequences_are_shown_escaped(tmp_path):
    d = tmp_path / "evil"
    d.mkdir()
    pg = {"pg_name": "0", "pg_desc": "\x1b[2Jdesc", "ranks": [0], "pg_size": 1}
    doc = {
        "traceEvents": [step(), kernel(name=HOSTILE, **{"Group size": 1})],
        "distributedInfo": {"rank": 0, "world_size": 1, "backend": "nccl", "pg_config": [pg]},
    }
    (d / "rank0.json").write_text(json.dumps(doc))
    for args in (["info", str(d)], ["analyze", str(d), "--format", "table", "--width", "250"]):
        res = _cli(*args)
        assert res.exit_code == 0, res.output
        assert "\x1b" not in res.output and "\x07" not in res.output
    assert "\\x1b]0;pwned\\x07" in res.output  # the kernel, in the top exposed collectives, escaped and legible
    assert "\\x1b[2J" in _cli("info", str(d)).output  # the process group description


# -- a killed process's .json.gz: the gzip stream itself is cut ---------------------------------------------------
def test_truncated_gzip_trace_is_salvaged(tmp_path):
    src = gpu_trace("pp-sendrecv-128rank-rank0.json.gz")
    full, _ = _load(src)
    raw = open(src, "rb").read()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) // 2])  # no gzip trailer, JSON cut mid-event
    table, info = _load(cut)
    assert 0 < len(table) < len(full)
    rows = lambda t: set(map(tuple, np.c_[t["ts_ns"], t["dur_ns"], t["kind"]].tolist()))
    assert rows(table) <= rows(full)  # every kept event is a real event of the trace, unchanged
    (w,) = [w for w in info.warnings if ": truncated at byte" in w]  # (the tmp path says "truncated" too)
    assert str(cut) in w and "kept" in w and "lost" in w


# -- paths derived from trace content stay in their directory -------------------------------------------------------
@pytest.mark.parametrize("name", ["../../etc/x.json", "..json", "a/b/../../../c.json.gz", ".tracekit_cache.json"])
def test_cache_paths_stay_in_the_cache_dir(tmp_path, name):
    import os

    from tracekit.loader.cache import cache_path

    target = cache_path(str(tmp_path / "runs" / name), str(tmp_path / "cache"))
    assert os.path.dirname(target) == str(tmp_path / "cache")
