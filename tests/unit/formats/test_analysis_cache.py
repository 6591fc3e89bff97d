"""The analysis cache (tracekit/formats/analysis_cache.py): a warm `tracekit analyze` gives byte for byte what a
fresh analysis gives, without loading; anything the summary depends on invalidates the entry; an entry is
untrusted input."""

from __future__ import annotations

import glob
import importlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.cli import _analysis, cli

analyze_cmd = importlib.import_module("tracekit.cli.analyze")

DATA = Path(__file__).resolve().parents[2] / "data"
FIXTURES = [
    "kineto-gpu/allreduce-broadcast-2rank-rank0.json.gz",
    "kineto-gpu-more/cuda-event-sync-multi-stream.json.gz",
    "kineto-gpu-more/oldformat-kernel-runtime-categories.json.gz",
]


def _run(*args: str, ok: bool = True):
    res = CliRunner().invoke(cli, ["analyze", *args], catch_exceptions=False)
    if ok:
        assert res.exit_code == 0, res.output
    return res


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(DATA / FIXTURES[0], d / "rank0.json.gz")
    return d


@pytest.fixture
def counted(monkeypatch):
    """How many times the traces were really analysed (the real function, counted)."""
    calls = []
    real = _analysis.analysis_from_traces

    def counting(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(analyze_cmd, "analysis_from_traces", counting)
    return calls


def _entries() -> list[str]:
    return glob.glob(os.path.join(os.environ["TRACEKIT_CACHE_DIR"], "analysis.*.json"))


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("fmt", ["json", "table", "markdown"])
def test_a_warm_run_prints_what_a_fresh_analysis_prints(tmp_path, fixture, fmt, counted):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(DATA / fixture, d / "trace.json.gz")
    args = [str(d), "--format", fmt, "--width", "200"]
    fresh = _run(*args, "--no-cache").output
    assert counted and not _entries()  # --no-cache neither reads nor writes an entry
    first = _run(*args).output
    assert len(counted) == 2 and len(_entries()) == 1
    warm = _run(*args).output
    assert len(counted) == 2  # served from the entry: not analysed again
    assert warm == first == fresh


@pytest.mark.slow
def test_whatever_the_summary_depends_on_invalidates_the_entry(run_dir, counted, monkeypatch, tmp_path):
    trace = run_dir / "rank0.json.gz"

    def analysed(*args: str) -> bool:
        before = len(counted)
        _run(str(run_dir), "--format", "json", *args)
        return len(counted) > before

    assert analysed() and not analysed()
    os.utime(trace, ns=(trace.stat().st_atime_ns, trace.stat().st_mtime_ns + 1))  # touched
    assert analysed() and not analysed()
    stamp = trace.stat()
    data = bytearray(trace.read_bytes())
    trace.write_bytes(bytes(data))  # rewritten with the mtime put back: the ctime still moves
    os.utime(trace, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert analysed() and not analysed()
    (run_dir / "run.json").write_text("{}")  # a manifest appears beside the trace
    assert analysed() and not analysed()
    assert analysed("--window", "ProfilerStep*") and not analysed("--window", "ProfilerStep*")
    assert analysed("--comm-pattern", "gemm") and analysed("--dim-map", "x=tp")
    assert not analysed()  # each set of options has an entry of its own
    rules = tmp_path / "rules.toml"
    rules.write_text('[[comm]]\npattern = "aaaa"\n')
    assert analysed("--comm-rules", str(rules)) and not analysed("--comm-rules", str(rules))
    st = rules.stat()
    rules.write_text('[[comm]]\npattern = "gemm"\n')  # the same size, the mtime put back
    os.utime(rules, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert analysed("--comm-rules", str(rules))
    monkeypatch.setenv("TRACEKIT_MAX_GZIP_RATIO", "500")
    assert analysed() and not analysed()


def test_options_that_only_say_where_or_how_share_the_entry(run_dir, counted):
    _run(str(run_dir), "--format", "json")
    _run(str(run_dir), "--format", "json", "--executor", "serial")
    _run(str(run_dir), "--format", "table")
    assert len(counted) == 1


def test_outputs_that_need_the_analysis_itself_bypass_the_entry(run_dir, counted, tmp_path):
    _run(str(run_dir), "--format", "json")
    _run(str(run_dir), "--format", "json", "--timeline-out", str(tmp_path / "tl.json"))
    _run(str(run_dir), "--format", "json", "--collectives-out", str(tmp_path / "c.parquet"))
    assert len(counted) == 3 and (tmp_path / "tl.json").stat().st_size and (tmp_path / "c.parquet").stat().st_size


def test_a_trace_that_changes_during_the_analysis_is_not_cached(run_dir, counted, monkeypatch):
    real = analyze_cmd.analysis_from_traces

    def growing(*a, **k):
        out = real(*a, **k)
        with open(run_dir / "rank0.json.gz", "ab") as fh:  # the profiler still writing
            fh.write(b"\0")
        return out

    monkeypatch.setattr(analyze_cmd, "analysis_from_traces", growing)
    _run(str(run_dir), "--format", "json", ok=False)
    assert not _entries()


def test_errors_are_not_cached(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    (d / "rank0.json").write_text('{"traceEvents": []}')
    for _ in range(2):
        res = _run(str(d), "--format", "json", ok=False)
        assert res.exit_code == 3 and "Traceback" not in res.output
    assert not _entries()


@pytest.mark.parametrize(
    "content, why",
    [
        (b"\x00\x01garbage", "not valid JSON"),
        (b'{"schema": "tracekit.analysis_cache/1", "key": {}, "summary": 5}', "Expected `object`"),
        (
            b'{"schema": "tracekit.analysis_cache/1", "key": {}, "summary": {"schema": "tracekit.summary/1"}, "extra": NaN}',
            "not valid JSON",
        ),
        (b"[" * 100_000, "nested too deeply"),
    ],
)
def test_a_broken_entry_is_a_warning_and_a_fresh_analysis(run_dir, counted, content, why):
    fresh = _run(str(run_dir), "--format", "json", "--no-cache").output
    _run(str(run_dir), "--format", "json")
    (entry,) = _entries()
    Path(entry).write_bytes(content)
    out = json.loads(_run(str(run_dir), "--format", "json").output)
    (warning,) = [w for w in out["warnings"] if "analysis cache" in w]
    assert why in warning and entry in warning
    out["warnings"].remove(warning)
    assert out == json.loads(fresh)
    assert _run(str(run_dir), "--format", "json").output == fresh  # rewritten: the next run is a clean hit
    assert len(counted) == 3


def test_an_entry_whose_summary_is_not_a_summary_is_not_served(run_dir, counted):
    _run(str(run_dir), "--format", "json")
    (entry,) = _entries()
    doc = json.loads(Path(entry).read_text())
    doc["summary"]["ranks"] = [{"rank": "abc"}]  # the right key, a summary of the wrong shape
    Path(entry).write_text(json.dumps(doc))
    out = _run(str(run_dir), "--format", "json").output
    assert "its summary is not a valid summary" in out and len(counted) == 2
    doc["summary"]["ranks"] = []
    doc["key"]["code"] = ["another tracekit"]  # an entry another version wrote: replaced, no warning
    Path(entry).write_text(json.dumps(doc))
    assert "analysis cache" not in _run(str(run_dir), "--format", "json").output and len(counted) == 3


def test_an_entry_that_is_a_fifo_is_refused_not_waited_on(run_dir, counted):
    _run(str(run_dir), "--format", "json")
    (entry,) = _entries()
    os.unlink(entry)
    os.mkfifo(entry)
    out = _run(str(run_dir), "--format", "json").output
    assert "not a regular file" in out and len(counted) == 2


def test_an_unwritable_cache_directory_is_no_error(run_dir, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(blocker / "sub"))  # a directory below a regular file
    assert _run(str(run_dir), "--format", "json").output == _run(str(run_dir), "--format", "json", "--no-cache").output


def test_a_rule_file_that_is_a_fifo_hangs_nothing(run_dir, tmp_path):
    """The key hashes the rule file's bytes: a FIFO there must be refused by the load, not block the key."""
    import subprocess
    import sys

    fifo = tmp_path / "rules.toml"
    os.mkfifo(fifo)
    res = subprocess.run(
        [sys.executable, "-m", "tracekit", "analyze", str(run_dir), "--format", "json", "--comm-rules", str(fifo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "FIFO" in res.stderr and "Traceback" not in res.stderr
