"""Hostile inputs built on the fly: a tiny intact trace, mutations of it and of the real traces in tests/data,
and the commands that read traces, run as real ``tracekit`` processes (a hang is a timeout, not a stuck suite)."""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 60  # per command; every case here ends in a few seconds when the loader holds


def kernel(ts, dur, name, corr, stream=7, **args):
    a = {"device": 0, "stream": stream, "correlation": corr, **args}
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": a}


def intact_doc() -> dict:
    """Rank 0 of 1: two steps, each a GEMM under which an all-reduce is partly hidden (figures that can change)."""
    events = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "python"}}]
    for s in range(2):
        o = 1000.0 * s
        c = 10 * s + 1
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}", "pid": 1, "tid": 1, "ts": o, "dur": 1000},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": o + 10, "dur": 50},
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": o + 20,
                "dur": 5,
                "args": {"correlation": c},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": o + 30,
                "dur": 5,
                "args": {"correlation": c + 1},
            },
            kernel(o + 100, 300, "ampere_sgemm_128x64_nn", c),
            kernel(
                o + 200,
                400,
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                c + 1,
                stream=8,
                **{
                    "Collective name": "allreduce",
                    "In msg nelems": 1024,
                    "Out msg nelems": 1024,
                    "dtype": "Float",
                    "Group size": 1,
                    "Process Group Name": "0",
                    "Process Group Description": "default_pg",
                    "Seq": s,
                },
            ),
        ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "distributedInfo": {
            "backend": "nccl",
            "rank": 0,
            "world_size": 1,
            "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 1, "ranks": [0]}],
        },
        "traceEvents": events,
        "traceName": "rank0.json",
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }


def mutated(**changes) -> dict:
    """The intact trace with header fields replaced (``distributedInfo__rank=...`` reaches one level down)."""
    doc = copy.deepcopy(intact_doc())
    for key, value in changes.items():
        target, _, sub = key.partition("__")
        if sub:
            doc[target][sub] = value
        else:
            doc[target] = value
    return doc


def write(path: Path, doc_or_text) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def whitespace_bomb(path: Path, mib: int) -> Path:
    """``mib`` MiB of spaces inside traceEvents, gzip'ed: concatenated members, one 1 MiB member repeated, so the
    file (about 1 KB per MiB) is built in milliseconds. tracekit reads multi-member gzip like any reader."""

    def member(data: bytes) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()

    blank = member(b" " * 1024**2)
    with open(path, "wb") as fh:
        fh.write(member(b'{"traceEvents": ['))
        for _ in range(mib):
            fh.write(blank)
        fh.write(member(b"]}"))
    return path


@dataclass
class Result:
    command: str
    rc: int
    stdout: str
    stderr: str
    peak_rss_kb: int = 0


def commands(path: Path, out: Path, *, rules: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The commands that take a trace; ``rules``: loader options for those that have them (not baseline/check)."""
    p = str(path)
    return {
        "info": ["info", p, "--no-cache", *rules],
        "analyze": ["analyze", p, "--format", "json", "--no-cache", *rules],
        "report": ["report", p, "-o", str(out / "report.html"), "--no-cache", *rules],
        "baseline": ["baseline", p, "-o", str(out / "baseline.json")],
        "check": ["check", p, "--budget", "exposed_comm_share<=1.0"],
    }


def run_all(
    cmds: dict[str, list[str]], cache_dir: Path, timeout: float = TIMEOUT_S, env: dict[str, str] | None = None
) -> dict[str, Result]:
    """Every command as its own ``python -m tracekit`` process, all started at once (each pays the interpreter's
    start-up; side by side they share it), each held to ``timeout``. A process still running then is killed
    and reported with rc None-as-124."""
    env = dict(os.environ, TRACEKIT_CACHE_DIR=str(cache_dir), COLUMNS="200", **(env or {}))
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "tracekit", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        for name, args in cmds.items()
    }
    results = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            rc = 124
        results[name] = Result(name, rc, out, err)
    return results


def run_inproc(cmds: dict[str, list[str]], cache_dir: Path, timeout: int = TIMEOUT_S) -> dict[str, Result]:
    """The same commands through click's CliRunner in this process (one interpreter start-up for the whole
    suite), each under a SIGALRM watchdog: a blocking open() or a Python-level loop past ``timeout`` becomes
    rc 124. A traceback is an exception escaping the command (click's runner keeps it in ``exception``)."""
    import signal
    import traceback

    from click.testing import CliRunner

    from tracekit.cli import cli

    def alarm(signum, frame):
        raise TimeoutError(f"still running after {timeout} s")

    results = {}
    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for name, args in cmds.items():
            signal.alarm(timeout)
            try:
                r = CliRunner(env={"TRACEKIT_CACHE_DIR": str(cache_dir), "COLUMNS": "200"}).invoke(cli, args)
            finally:
                signal.alarm(0)
            err = r.stderr
            if r.exception is not None and not isinstance(r.exception, SystemExit):
                err += "".join(traceback.format_exception(r.exception))
                rc = 124 if isinstance(r.exception, TimeoutError) else 1
            else:
                rc = r.exit_code
            results[name] = Result(name, rc, r.stdout, err)
    finally:
        signal.signal(signal.SIGALRM, old)
    return results


# VmHWM: the peak of this process's own memory since its exec. ru_maxrss would also count the parent's pages at
# fork time (a pytest process grown to 1 GB makes every child look 1 GB).
_MEASURED = (
    "import atexit, runpy, sys\n"
    "out = sys.argv.pop(1)\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return line.split()[1]\n"
    "    import resource\n"
    "    return str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    "atexit.register(lambda: open(out, 'w').write(peak()))\n"
    "sys.argv[0] = 'tracekit'\n"
    "runpy.run_module('tracekit', run_name='__main__')\n"
)


def run_one(args: list[str], cache_dir: Path, timeout: float = TIMEOUT_S) -> Result:
    """One command, with its peak resident memory (the process's own ``ru_maxrss``, written at exit)."""
    env = dict(os.environ, TRACEKIT_CACHE_DIR=str(cache_dir), COLUMNS="200")
    rss = cache_dir.parent / f"rss-{os.getpid()}-{len(os.listdir(cache_dir.parent))}.txt"
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURED, str(rss), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Result(args[0], 124, out, err)
    peak = int(rss.read_text()) if rss.exists() else 0
    return Result(args[0], proc.returncode, out, err, peak)


def assert_refused(results: dict[str, Result], code: int, *needles: str) -> None:
    """Each command: the exit code, no traceback, and exactly one line on stderr that names the problem."""
    for name, r in results.items():
        assert r.rc != 124, f"{name}: still running after {TIMEOUT_S} s (a hang)"
        assert "Traceback" not in r.stderr + r.stdout, f"{name}: {r.stderr[-2000:]}"
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.rc == code, f"{name}: exit {r.rc}, expected {code}: {r.stderr[-1000:]}"
        assert len(lines) == 1 and lines[0].startswith("tracekit: error: "), f"{name}: {lines}"
        for needle in needles:
            assert needle in lines[0], f"{name}: {needle!r} not in {lines[0]!r}"


def assert_ok(results: dict[str, Result]) -> None:
    for name, r in results.items():
        assert r.rc != 124, f"{name}: still running after {TIMEOUT_S} s (a hang)"
        assert "Traceback" not in r.stderr + r.stdout, f"{name}: {r.stderr[-2000:]}"
        assert r.rc == 0, f"{name}: exit {r.rc}: {r.stderr[-1000:]}"


def figures(analyze_stdout: str) -> dict:
    """What must not change when a bad field is dropped: per-rank step and stream figures, and the collectives."""
    data = json.loads(analyze_stdout)
    collectives = [{k: v for k, v in c.items() if k != "start_us"} for c in data["collectives"]]  # absolute time
    # the overlap figures; the kernel breakdown beside them counts events, and the mutations add a duplicate
    ranks = [{k: r[k] for k in ("rank", "steps", "totals", "streams", "wait_us") if k in r} for r in data["ranks"]]
    return {"ranks": ranks, "collectives": collectives}
