"""Hostile inputs on the commands that take a trace (info, analyze --format json, report, baseline, check
--budget), each run as a real ``tracekit`` process with a timeout: no traceback, no hang, the documented exit
code (3 bad input, 2 bad option or rule file) and a one-line message; where the input still holds a valid trace,
the same figures as the intact trace.

Directories hold a good rank 0 beside the bad rank 1, so the bad file is read by the local process pool (two
files, two cores) and ``baseline``/``check`` read them through the loader. (Given a single plain ``.json`` file,
``baseline``/``check`` first read it as a summary document: that path belongs to the gate's typed documents.)
"""

from __future__ import annotations

import errno
import os
import socket

import pytest

from tests.helpers.data import DATA, gpu_trace
from tests.helpers.hostile import (
    assert_ok,
    assert_refused,
    commands,
    deep,
    figures,
    intact_doc,
    mutated,
    run_all,
    run_inproc,
    run_one,
    whitespace_bomb,
    write,
)

POOL = ("--executor", "process")
SERIAL = ("--executor", "serial")  # in this process: a SIGALRM can interrupt a blocking call in the main thread


@pytest.fixture
def case(tmp_path):
    """A run directory with the intact rank 0; tests add the hostile rank 1 (or replace rank 0)."""
    run = tmp_path / "run"
    write(run / "rank0.json", intact_doc())
    (tmp_path / "out").mkdir()
    (tmp_path / "cache").mkdir()
    return run


def _all(run, tmp_path, rules=SERIAL):
    """All five commands, in this process (see build.run_inproc); the subprocess tests below cover what only a
    real process shows (a hang in a blocking call, peak memory, the pool's workers)."""
    return run_inproc(commands(run, tmp_path / "out", rules=rules), tmp_path / "cache")


def _procs(run, tmp_path, names, rules=POOL):
    cmds = commands(run, tmp_path / "out", rules=rules)
    return run_all({k: cmds[k] for k in names}, tmp_path / "cache")


# -- not regular files, read errors ------------------------------------------------------------------------------
def _fifo(p):
    os.mkfifo(p)


def _socket(p):
    s, cwd = socket.socket(socket.AF_UNIX), os.getcwd()
    os.chdir(p.parent)  # a relative name: AF_UNIX paths are limited to 108 bytes, a deep TMPDIR is not
    try:
        s.bind(p.name)  # the socket file stays after close
    finally:
        os.chdir(cwd)
        s.close()


@pytest.mark.parametrize(
    "kind,make,message",
    [
        ("fifo", _fifo, "is a FIFO (named pipe), not a regular file"),
        ("dev-zero", lambda p: os.symlink("/dev/zero", p), "is a character device, not a regular file"),
        ("dev-urandom", lambda p: os.symlink("/dev/urandom", p), "is a character device, not a regular file"),
        ("socket", _socket, "is a socket, not a regular file"),
        ("read-error", lambda p: os.symlink("/proc/self/mem", p), "read error after 0 bytes"),  # EIO on every read
    ],
)
def test_files_that_are_not_traces(case, tmp_path, kind, make, message):
    make(case / "rank1.json")
    if kind == "read-error" and not _eio_on_read("/proc/self/mem"):
        pytest.skip("/proc/self/mem is not readable here (a sandbox): no file to give an I/O error")
    assert_refused(_all(case, tmp_path), 3, "rank1.json", message)


def _eio_on_read(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        return exc.errno == errno.EIO
    return False


def test_a_fifo_in_a_directory_hangs_no_process(case, tmp_path):
    """Real processes: the pool's workers meet the FIFO (before, every command hung in open())."""
    os.mkfifo(case / "rank1.json")
    assert_refused(_procs(case, tmp_path, ("info", "check")), 3, "rank1.json", "FIFO")


# -- nesting, duplicate keys -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["args", "header", "run.json"])
def test_json_nested_1000_levels(case, tmp_path, where):
    doc = intact_doc()
    doc["distributedInfo"].update(rank=1, world_size=2)
    if where == "args":
        doc["traceEvents"][2]["args"] = {"Input Dims": "@DEEP@"}
        write(case / "rank1.json", doc)
    elif where == "header":
        doc["deviceProperties"] = "@DEEP@"
        write(case / "rank1.json", doc)
    else:
        write(case / "run.json", {"layout": "@DEEP@"})
    for f in case.iterdir():
        f.write_text(f.read_text().replace('"@DEEP@"', deep(1000)))
    res = _all(case, tmp_path)
    assert_refused(res, 3, "run.json" if where == "run.json" else "rank1.json", "nested")
    if where == "args":  # the RecursionError used to come back from a pool worker as a traceback
        assert_refused(_procs(case, tmp_path, ("analyze",)), 3, "rank1.json", "nested")


def test_duplicate_trace_events_key(case, tmp_path):
    text = write(tmp_path / "x.json", mutated(distributedInfo__rank=1)).read_text()
    (case / "rank1.json").write_text(text[:-1] + ', "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k"}]}')
    assert_refused(_all(case, tmp_path), 3, "rank1.json", "two 'traceEvents' arrays")


# -- bombs -------------------------------------------------------------------------------------------------------------
def test_gzip_whitespace_bomb_is_refused_in_seconds_and_megabytes(tmp_path):
    """1 GiB of spaces inside traceEvents (a 1 MB file): before, accepted after 100 s at 2.2 GB."""
    (tmp_path / "cache").mkdir()
    bomb = whitespace_bomb(tmp_path / "bomb.json.gz", 1024)
    assert bomb.stat().st_size < 2 * 1024**2
    # the timeout is the hang guard only: speed is measured in benchmarks, never asserted in tests
    r = run_one(["info", str(bomb), "--no-cache"], tmp_path / "cache", timeout=120)
    assert_refused({"info": r}, 3, "bomb.json.gz", "whitespace bytes in a row")
    assert 0 < r.peak_rss_kb < 600 * 1024, r.peak_rss_kb  # the interpreter and its imports, not the bomb


def test_whitespace_bombs_on_every_command(case, tmp_path):
    whitespace_bomb(case / "rank1.json.gz", 256)
    assert_refused(_all(case, tmp_path), 3, "rank1.json.gz", "whitespace bytes in a row")


def test_plain_json_whitespace_padding(case, tmp_path):
    text = write(tmp_path / "x.json", mutated(distributedInfo__rank=1)).read_text()
    (case / "rank1.json").write_text(text.replace('"traceEvents": [', '"traceEvents": [' + "\n" * 8 * 1024**2, 1))
    assert_refused(_all(case, tmp_path), 3, "rank1.json", "whitespace bytes in a row")


# -- user regexes and rule files ----------------------------------------------------------------------------------------
def test_catastrophic_pattern_on_real_kernel_names(tmp_path):
    """'(.*a){20}$' backtracks for hours on a long kernel name in Python's re; on RE2 it is linear."""
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), run / "rank0.json.gz")
    (tmp_path / "out").mkdir()
    (tmp_path / "cache").mkdir()
    cmds = commands(run, tmp_path / "out", rules=("--comm-pattern", "(.*a){20}$", "--comm-pattern", "(x+x+)+y"))
    res = run_all({"analyze": cmds["analyze"]}, tmp_path / "cache")
    assert_ok(res)
    assert_ok(run_inproc({k: cmds[k] for k in ("info", "report")}, tmp_path / "cache"))


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("shape.toml", b"comm = 5\n", "'comm' must be an array of tables"),
        ("latin1.toml", b'[[comm]]\npattern = "caf\xe9"\n', "not UTF-8"),
        ("pattern-int.toml", b"[[comm]]\npattern = 5\n", "field 'pattern': the pattern must be a string"),
        ("library-int.toml", b'[[comm]]\npattern = "x"\nlibrary = 5\n', "field 'library' must be a string"),
        ("no-pattern.toml", b'[[comm]]\nlibrary = "x"\n', "needs a string 'pattern'"),
        ("bad-regex.toml", b'[[comm]]\npattern = "("\n', "not a valid regular expression"),
        ("long-pattern.toml", b'[[comm]]\npattern = "' + b"a" * 100_000 + b'"\n', "a pattern of 100000 bytes"),
        ("huge.toml", None, "larger than 1048576 bytes"),  # 50 MB: read no further than the limit
        ("not-toml.toml", b"[[comm\n", "not valid TOML"),
        ("unknown-field.toml", b'[[comm]]\npattern = "x"\nlibary = "y"\n', "unknown field 'libary'"),
        ("entry-not-a-table.toml", b'comm = ["x"]\n', "entry 1: must be a table"),
        ("fifo.toml", "FIFO", "is a FIFO (named pipe), not a regular file"),
        ("deep.toml", b"comm = " + b"[" * 5000 + b"]" * 5000 + b"\n", "not valid TOML"),
    ],
)
def test_bad_rule_files(case, tmp_path, name, content, message):
    rules = tmp_path / name
    if content == "FIFO":
        os.mkfifo(rules)
    elif content is None:
        with open(rules, "wb") as fh:
            fh.write(b'[[comm]]\npattern = "')
            fh.truncate(50 * 1024**2)
    else:
        rules.write_bytes(content)
    cmds = commands(case, tmp_path / "out", rules=("--comm-rules", str(rules)))
    res = run_inproc({k: v for k, v in cmds.items() if k in ("info", "analyze", "report")}, tmp_path / "cache")
    assert_refused(res, 2, name, message)


def test_bad_patterns_on_the_command_line(case, tmp_path):
    for pattern, message in (("(", "not a valid regular expression"), ("a" * 70_000, "a pattern of 70000 bytes")):
        cmds = commands(case, tmp_path / "out", rules=("--comm-pattern", pattern))
        assert_refused(run_inproc({"info": cmds["info"]}, tmp_path / "cache"), 2, "--comm-pattern", message)


def test_a_limit_in_the_environment_that_is_not_a_number(case, tmp_path):
    """Read at import: before, TRACEKIT_MAX_TRACE_BYTES=abc was a ValueError traceback from every command."""
    cmds = commands(case, tmp_path / "out")
    res = run_all(
        {k: cmds[k] for k in ("info", "check")},
        tmp_path / "cache",
        env={"TRACEKIT_MAX_TRACE_BYTES": "abc", "TRACEKIT_MAX_GZIP_RATIO": "-1"},
    )
    assert_refused(res, 2, "TRACEKIT_MAX_TRACE_BYTES='abc': expected a positive number")


def test_a_backtracking_pattern_re2_cannot_run_is_stopped_not_left_to_hang(tmp_path):
    """'(.+)+\\1(?=q)' needs a backtracking engine (a backreference, a lookahead) and takes minutes on the 5 kB
    kernel names of a real trace; the regex module's timeout stops each search and the command ends in one line."""
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(DATA / "kineto-gpu-more" / "cupti-range-profiler.json.gz", run / "rank0.json.gz")
    (tmp_path / "out").mkdir()
    (tmp_path / "cache").mkdir()
    cmds = commands(run, tmp_path / "out", rules=("--comm-pattern", r"(.+)+\1(?=q)"))
    res = run_inproc({k: cmds[k] for k in ("info", "analyze")}, tmp_path / "cache")
    assert_refused(res, 2, "(.+)+", "catastrophic backtracking")


def test_backreference_falls_back_with_a_warning(case, tmp_path):
    cmds = commands(case, tmp_path / "out", rules=("--comm-pattern", r"^(amp)ere.*\1"))
    res = run_inproc({"analyze": cmds["analyze"]}, tmp_path / "cache")
    assert_ok(res)
    assert any("backtracking" in w for w in __import__("json").loads(res["analyze"].stdout)["warnings"])


# -- still a valid trace: the bad parts dropped, the figures unchanged ----------------------------------------------------
def test_header_faults_drop_fields_and_keep_the_figures(tmp_path):
    """Every header fault at once, on every command: each field dropped with a warning naming it; the same figures."""
    (tmp_path / "out").mkdir()
    (tmp_path / "cache").mkdir()
    intact = run_inproc(
        {"analyze": commands(write(tmp_path / "a" / "rank0.json", intact_doc()), tmp_path / "out")["analyze"]}, tmp_path / "cache"
    )["analyze"]
    doc = mutated(baseTimeNanoseconds=1.7e18, trace_id={"a": [1]}, deviceProperties={"name": "x"})
    doc["distributedInfo"].update(
        rank="one", world_size=-3, pg_count=1.5, pg_config=[{"pg_name": {"x": 1}, "pg_desc": "default_pg", "ranks": [{}]}, 5]
    )
    doc["traceEvents"] += [dict(doc["traceEvents"][3], args={"correlation": 99, "traceEvents": [1]})]
    path = tmp_path / "b" / "rank0.json"
    write(path, doc)
    res = run_inproc(commands(path.parent, tmp_path / "out"), tmp_path / "cache")
    assert_ok(res)
    assert figures(res["analyze"].stdout) == figures(intact.stdout)
    warnings = " ".join(__import__("json").loads(res["analyze"].stdout)["warnings"])
    for field in (
        "baseTimeNanoseconds",
        "trace_id",
        "deviceProperties",
        "distributedInfo.rank",
        "distributedInfo.world_size",
        "distributedInfo.pg_count",
        "distributedInfo.pg_config[0].pg_name",
        "distributedInfo.pg_config[0].ranks",
        "distributedInfo.pg_config[1]",
    ):
        assert f"header field {field} " in warnings, field


def test_events_with_times_no_column_holds_are_counted_once_and_mark_their_steps(tmp_path):
    """ts 1e400 (beyond float range), dur 1e400 and ts 1e18 µs: each drops its event only, counted once in one
    warning; the one whose start is readable marks its step, the two without a readable time every step (issue 29:
    before, both steps stayed complete and the gate passed on them)."""
    doc = intact_doc()
    doc["traceEvents"] += [
        dict(doc["traceEvents"][2], ts=1e18),
        dict(doc["traceEvents"][2], ts="@BIG@"),
        dict(doc["traceEvents"][2], dur="@BIG@"),
    ]
    path = tmp_path / "b" / "rank0.json"
    write(path, doc)
    path.write_text(path.read_text().replace('"@BIG@"', "1e400"))
    (tmp_path / "cache").mkdir()
    res = run_inproc({"check": ["check", str(path), "--budget", "exposed_comm_share<=1.0"]}, tmp_path / "cache")["check"]
    assert res.rc == 1 and "Traceback" not in res.stderr
    assert res.stderr.count("dropped 3 events with missing, non-finite or negative times") == 1
    assert "rank 0 step 1: lost 3 events (3 times)" in res.stdout + res.stderr
    assert "2 dropped events have no readable time" in res.stderr


def test_lone_surrogate_escapes_in_names(tmp_path):
    """'\\ud800' alone (Python's json writes it for a name cut mid-character): msgspec refuses it, which refused the
    whole trace; now read as U+FFFD with a warning, the figures unchanged (user patterns still match the name)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "cache").mkdir()
    intact = run_inproc(
        {"analyze": commands(write(tmp_path / "a" / "rank0.json", intact_doc()), tmp_path / "out")["analyze"]}, tmp_path / "cache"
    )["analyze"]
    doc = intact_doc()
    doc["traceEvents"][5]["name"] = "ampere_sgemm_128x64_nn\ud800"
    doc["traceEvents"][6]["name"] += "\udcff \U0001f600"  # a lone low surrogate, then a valid pair
    run = write(tmp_path / "b" / "rank0.json", doc).parent
    res = run_inproc(commands(run, tmp_path / "out", rules=("--comm-pattern", "^nomatch", *SERIAL)), tmp_path / "cache")
    assert_ok(res)
    got = __import__("json").loads(res["analyze"].stdout)
    assert figures(res["analyze"].stdout)["ranks"] == figures(intact.stdout)["ranks"]
    assert any("2 lone UTF-16 surrogate escapes" in w for w in got["warnings"])
    assert got["collectives"][0]["name"].endswith("\ufffd \U0001f600")


def test_header_faults_on_a_real_nccl_trace(tmp_path):
    """The real all-reduce trace (rank 0 of 2), its header damaged field by field: the same per-rank figures and
    collectives as the intact file, the rank and world size kept (they were not damaged)."""
    import gzip
    import json

    (tmp_path / "out").mkdir()
    (tmp_path / "cache").mkdir()
    src = gpu_trace("allreduce-broadcast-2rank-rank0.json.gz")
    doc = json.loads(gzip.open(src).read())
    doc["baseTimeNanoseconds"] = float(doc["baseTimeNanoseconds"])
    doc["trace_id"] = ["not", "a", "string"]
    doc["distributedInfo"]["nccl_version"] = 2.17
    doc["distributedInfo"]["pg_config"][0]["pg_size"] = "two"
    doc["distributedInfo"]["pg_config"].append({"pg_name": [1], "ranks": "[0, 1]"})
    write(tmp_path / "bad" / "rank0.json.gz", doc)
    got = run_inproc(
        {
            "intact": commands(src, tmp_path / "out", rules=SERIAL)["analyze"],
            "bad": commands(tmp_path / "bad", tmp_path / "out", rules=SERIAL)["analyze"],
        },
        tmp_path / "cache",
    )
    assert_ok(got)
    assert figures(got["bad"].stdout) == figures(got["intact"].stdout)
    data = json.loads(got["bad"].stdout)
    assert data["run"]["world_size"] == 2 and [r["rank"] for r in data["ranks"]] == [0]
    warned = " ".join(data["warnings"])
    for field in (
        "baseTimeNanoseconds",
        "trace_id",
        "distributedInfo.nccl_version",
        "distributedInfo.pg_config[0].pg_size",
        "distributedInfo.pg_config[1].pg_name",
    ):
        assert f"header field {field} " in warned, field
