"""pytest plugin: hold a test's communication overlap to a budget.

    @pytest.mark.tracekit_overlap(min_overlap_ratio=0.3, max_exposed_comm_share=0.2,
                                  budgets=["tp/all_gather:exposed_comm_us<=800"])
    def test_tp_layer(tracekit_profile):      # the fixture is optional: it marks steps
        for _ in range(4):
            with tracekit_profile.step():
                train_step()

Each step is one sample of the medians. Without the fixture the whole test body is one step; with it, only
what runs inside ``step()`` blocks is in a step.

The test body (this process only) runs under torch.profiler; the trace is loaded and analysed like any other
run, and the test fails with the gate's one-line explanation when a budget is violated. A test that records
no communication at all fails too: there is nothing to hold the overlap budget against. Budgets are the
`tracekit check --budget` expressions (docs in tracekit.gate.budgets). ``--tracekit-dir DIR`` keeps the traces.
Registered as the ``tracekit`` pytest11 entry point; without an installed distribution use ``-p tracekit.pytest_plugin``.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

MARKER = "tracekit_overlap"
_SESSION = pytest.StashKey["OverlapSession"]()


class OverlapSession:
    """torch.profiler around one test body, with ProfilerStep#N markers; then the summary."""

    def __init__(self, out_dir: Path, whole_body_step: bool = False):
        self.out_dir = Path(out_dir)
        self.summary: Any = None  # a tracekit.gate.RunMetrics once the test body has run and been analysed
        self._whole_body_step = whole_body_step
        self._prof: Any = None
        self._body_rf: Any = None
        self._steps = 0

    def start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        self._prof = profile(activities=activities, record_shapes=True)
        self._prof.__enter__()
        if self._whole_body_step:
            self._body_rf = torch.autograd.profiler.record_function("ProfilerStep#0")
            self._body_rf.__enter__()

    @contextlib.contextmanager
    def step(self):
        """``with tracekit_profile.step(): ...`` marks one step of the test body."""
        import torch

        if self._prof is None:
            raise RuntimeError("tracekit_profile.step() outside the profiled test body")
        with torch.autograd.profiler.record_function(f"ProfilerStep#{self._steps}"):
            yield
        self._steps += 1

    def stop(self) -> Path:
        import torch.distributed as dist

        if self._body_rf is not None:
            self._body_rf.__exit__(None, None, None)
            self._body_rf = None
        self._prof.__exit__(None, None, None)
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"rank{rank}.trace.json"
        self._prof.export_chrome_trace(str(path))
        self._prof = None
        return path

    def analyse(self):
        from .gate.metrics import RunMetrics
        from .gate.source import summary_from_traces

        self.summary = RunMetrics(summary_from_traces(self.out_dir), str(self.out_dir))
        return self.summary


def budgets_from_marker(marker) -> list:
    """The marker's arguments as parsed budgets; a bad one raises ConfigError."""
    from .errors import ConfigError
    from .gate.budgets import parse_budget

    kwargs = dict(marker.kwargs) if marker is not None else {}
    exprs = []
    if (v := kwargs.pop("min_overlap_ratio", None)) is not None:
        exprs.append(f"overlap_ratio>={float(v)!r}")
    if (v := kwargs.pop("max_exposed_comm_share", None)) is not None:
        exprs.append(f"exposed_comm_share<={float(v)!r}")
    budgets = kwargs.pop("budgets", ())
    exprs.extend([budgets] if isinstance(budgets, str) else list(budgets))
    exprs.extend(marker.args if marker is not None else ())
    if kwargs:
        raise ConfigError(
            f"@pytest.mark.{MARKER}: unknown argument(s) {', '.join(sorted(kwargs))}; "
            "use min_overlap_ratio, max_exposed_comm_share, budgets"
        )
    return [parse_budget(e) for e in exprs]


def overlap_failures(summary, budgets) -> list[str]:
    """One line per violated budget; a run with no communication is itself a failure."""
    comm = summary.stat("comm_us")
    if comm is None or comm.median <= 0:
        return [
            "no communication recorded in the test body: nothing to hold the overlap budget against "
            "(did the collectives run in this process?)"
        ]
    return [r.message for b in budgets for r in b.evaluate(summary) if not r.passed]


def _out_dir(item) -> Path:
    keep = item.config.getoption("tracekit_dir", None)
    if keep:
        return Path(keep) / re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)
    return Path(tempfile.mkdtemp(prefix="tracekit-"))


def pytest_addoption(parser) -> None:
    group = parser.getgroup("tracekit")
    group.addoption(
        "--tracekit-dir",
        dest="tracekit_dir",
        metavar="DIR",
        default=None,
        help="keep the traces of @pytest.mark.tracekit_overlap tests under DIR",
    )


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(min_overlap_ratio=None, max_exposed_comm_share=None, budgets=()): "
        "profile the test body and fail it when the overlap budget is violated",
    )


@pytest.fixture
def tracekit_profile(request) -> OverlapSession:
    """The profiling session of this test: ``with tracekit_profile.step():`` around each step of the body."""
    session = OverlapSession(_out_dir(request.node))
    request.node.stash[_SESSION] = session
    return session


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker(MARKER)
    session = item.stash.get(_SESSION, None)
    if marker is None and session is None:
        return (yield)
    from .errors import TracekitError

    try:
        budgets = budgets_from_marker(marker)
    except TracekitError as exc:
        pytest.fail(f"tracekit: {exc}", pytrace=False)
    session = session or OverlapSession(_out_dir(item), whole_body_step=True)
    session.start()
    try:
        result = yield
    finally:
        session.stop()
    if not budgets:
        return result
    try:
        failures = overlap_failures(session.analyse(), budgets)
    except TracekitError as exc:
        pytest.fail(f"tracekit: {exc}", pytrace=False)
    if failures:
        pytest.fail("tracekit overlap budget: " + " | ".join(failures), pytrace=False)
    return result
