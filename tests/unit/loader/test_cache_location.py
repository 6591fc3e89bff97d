"""Where the caches go by default (issue 32): the user's cache directory, keyed by the trace's resolved path, never
the trace's folder; --cache-dir and TRACEKIT_CACHE_DIR as before."""

from __future__ import annotations

import os
import shutil
import stat

import pytest
from click.testing import CliRunner

from tests.helpers.data import real_trace
from tracekit.cli import cli
from tracekit.formats.cache_location import default_cache_dir


def _files(d) -> list[str]:
    return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)


@pytest.fixture
def read_only_traces(tmp_path):
    d = tmp_path / "shared-traces"
    d.mkdir()
    shutil.copy(real_trace("pp-sendrecv-128rank-rank0"), d / "rank0.json.gz")
    d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    yield d
    d.chmod(stat.S_IRWXU)


def test_the_default_is_the_user_cache_directory(tmp_path, monkeypatch, read_only_traces):
    monkeypatch.delenv("TRACEKIT_CACHE_DIR", raising=False)
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    assert default_cache_dir() == str(xdg / "tracekit")
    before = _files(read_only_traces)
    for _ in range(2):  # the second run reads the analysis entry the first one wrote
        res = CliRunner().invoke(cli, ["analyze", str(read_only_traces), "--format", "json", "--executor", "serial"])
        assert res.exit_code == 0, res.output
    assert _files(read_only_traces) == before  # nothing written beside the traces
    kept = _files(xdg / "tracekit")
    assert [f for f in kept if f.startswith("rank0.json.gz.") and f.endswith(".parquet")], kept
    assert [f for f in kept if f.startswith("analysis.")], kept
    link = tmp_path / "link.json.gz"  # the same trace by another name: the same entry (keyed by its resolved path)
    link.symlink_to(read_only_traces / "rank0.json.gz")
    res = CliRunner().invoke(cli, ["info", str(link), "--executor", "serial"])
    assert res.exit_code == 0 and _files(xdg / "tracekit") == kept


def test_without_xdg_it_is_under_home(tmp_path, monkeypatch):
    monkeypatch.delenv("TRACEKIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == str(tmp_path / "home" / ".cache" / "tracekit")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # the spec: a relative XDG_CACHE_HOME is ignored
    assert default_cache_dir() == str(tmp_path / "home" / ".cache" / "tracekit")


def test_cache_dir_and_the_variable_win(tmp_path, monkeypatch):
    trace = tmp_path / "t.json.gz"
    shutil.copy(real_trace("pp-sendrecv-128rank-rank0"), trace)
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "env"))
    assert CliRunner().invoke(cli, ["info", str(trace), "--executor", "serial"]).exit_code == 0
    assert _files(tmp_path / "env")
    given = tmp_path / "given"
    assert CliRunner().invoke(cli, ["info", str(trace), "--executor", "serial", "--cache-dir", str(given)]).exit_code == 0
    assert _files(given) and not (tmp_path / "xdg-cache").exists()
    assert not (tmp_path / ".tracekit_cache").exists()
