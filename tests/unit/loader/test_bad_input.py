"""Bad input: one-line errors naming the file, exit code 3 from the CLI, salvage of truncated traces."""

import gzip
import json
import shutil

import pytest
from click.testing import CliRunner

from tests.helpers.data import gpu_trace
from tracekit.cli import cli
from tracekit.errors import InputLimitError, TraceFormatError
from tracekit.loader.loading import LoadOptions, load_file
from tracekit.model.events import EventKind as K


def _load(path, **kw):
    return load_file(str(path), LoadOptions(cache=False, **kw))


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "empty file"),
        (b"this is not json", "not valid JSON"),
        (b'{"foo": 1}', "without 'traceEvents'"),
        (b"[1, 2, 3]", "not a Kineto"),
    ],
)
def test_malformed_files_raise_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=message) as err:
        _load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_corrupt_gzip(tmp_path):
    path = tmp_path / "bad.json.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"garbage" * 10)
    with pytest.raises(TraceFormatError, match="corrupt gzip"):
        _load(path)


def test_truncated_trace_is_salvaged_with_a_warning(tmp_path):
    src = gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")
    data = gzip.open(src).read()
    full, _ = _load(src)
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * 0.6)])
    table, info = _load(cut)
    assert 0 < len(table) < len(full)
    assert any("truncated" in w and "kept" in w for w in info.warnings)
    assert info.rank == 0  # the header before traceEvents survives


def test_gzip_bomb_is_refused(tmp_path):
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * 5_000_000 + b"]}"))
    with pytest.raises(InputLimitError, match="--max-trace-bytes"):
        _load(path, max_bytes=1_000_000)


def test_bad_events_are_dropped_with_a_count(tmp_path):
    good = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5}
    events = [good, dict(good, dur=-5), dict(good, ts=None), dict(good, name=["not", "a", "string"])]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    table, info = _load(path)
    assert len(table) == 1 and table["kind"][0] == K.CPU_OP
    assert any("dropped 1 of 4 events with malformed fields" in w for w in info.warnings)
    assert any("dropped 2 events with missing, non-finite or negative" in w for w in info.warnings)


def test_cli_exit_code_3_and_one_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("nope")
    result = CliRunner().invoke(cli, ["info", str(path), "--no-cache"])
    assert result.exit_code == 3
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tracekit: error:") and "bad.json" in lines[0]


def test_cli_info_json_counts(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), d)
    result = CliRunner().invoke(cli, ["info", str(d), "--format", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    r = data["ranks"][0]
    assert r["collectives"] == {"all_reduce@0": 15, "broadcast@0": 6}
    assert r["steps"] == [4, 5, 6] and r["comm_by_library"] == {"nccl": 21}


def test_cache_roundtrip_and_invalidation(tmp_path, monkeypatch):
    import os

    src = tmp_path / "r.json.gz"
    shutil.copy(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), src)
    opts = LoadOptions(cache=True, cache_dir=str(tmp_path / "c"))
    first, info1 = load_file(str(src), opts)
    assert len(os.listdir(tmp_path / "c")) == 1
    calls = []
    import tracekit.loader.loading as io

    real = io._load_streaming  # every load that reads the trace goes through it first
    monkeypatch.setattr(io, "_load_streaming", lambda *a, **k: calls.append(1) or real(*a, **k))
    second, info2 = load_file(str(src), opts)
    assert calls == []  # served from Parquet
    assert second.strings == first.strings and info2 == info1
    for col in first.columns:
        assert (second[col] == first[col]).all(), col
    os.utime(src, ns=(1, 1))  # a changed source invalidates the cache
    load_file(str(src), opts)
    assert calls == [1]
