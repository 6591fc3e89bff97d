"""Kineto's own log lines stay out of a run's output (tracekit/collectors/quiet.py), everything else gets through.

Each case runs in a fresh interpreter, since the filter replaces the process's file descriptor 2. The first one
starts a real torch.profiler, whose USDT lines are the chatter to drop (torch 2.13 prints them at every start and
stop whatever KINETO_LOG_LEVEL says)."""

from __future__ import annotations

import subprocess
import sys

PROFILE = """
import os, sys, torch
from torch.profiler import profile, ProfilerActivity
{install}
with profile(activities=[ProfilerActivity.CPU]):
    torch.ones(3) + 1
os.write(2, b"a line of the run\\n")
print("a python warning", file=sys.stderr)
"""


def _stderr(code: str, **env) -> str:
    import os

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_kineto_prints_usdt_lines_without_the_filter():
    err = _stderr(PROFILE.format(install=""))
    assert "profiler_start" in err and err.startswith("USDT:")  # the chatter is real: this test can fail


def test_the_filter_drops_them_and_keeps_the_rest():
    err = _stderr(PROFILE.format(install="from tracekit.collectors.quiet import quiet_profiler_chatter as q; assert q()"))
    assert err.splitlines() == ["a line of the run", "a python warning"]


def test_verbose_lets_them_through():
    err = _stderr(
        PROFILE.format(install="from tracekit.collectors.quiet import quiet_profiler_chatter as q; assert not q()"),
        TRACEKIT_VERBOSE="1",
    )
    assert "profiler_start" in err


def test_partial_lines_pass_at_once_and_tracebacks_whole():
    code = """
import os, sys, time
from tracekit.collectors import quiet
quiet.quiet_profiler_chatter()
os.write(2, b"\\rprogress 1/2")
time.sleep(0.2)
assert quiet._installed
os.write(2, b" done\\nUSDT:2026-12-01 12:02:10 1:1 SyncActivityProfilerHandler.cpp:59] profiler_stop\\n")
os.write(2, b"USDT: a line of someone else\\n")
raise SystemExit("boom: a rank failed")
"""
    import os

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, env=dict(os.environ))
    assert r.returncode == 1
    assert r.stderr == b"\rprogress 1/2 done\nUSDT: a line of someone else\nboom: a rank failed\n"
