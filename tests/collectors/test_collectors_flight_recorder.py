"""The Flight Recorder collector in one process (a one-rank gloo group): dumped at the end and when the block
raises, the user's exception unchanged; every fault a line in ``problems``, never an exception in the run."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import tracekit  # noqa: E402
from tracekit.collectors import flight_recorder  # noqa: E402
from tracekit.loader.flight import read_flight_dir  # noqa: E402


@pytest.fixture
def one_rank():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1, timeout=timedelta(seconds=30))
    yield
    dist.destroy_process_group()


def test_dumped_at_the_end_beside_the_traces_without_the_profiler(tmp_path, one_rank):
    with tracekit.profile(tmp_path, ranks=[], flight_recorder=True) as p:
        for _ in range(3):
            dist.all_reduce(torch.ones(4))
    assert p.flight_dump == tmp_path / "_dump_0" and p.problems == [] and p.trace_paths == []
    run = read_flight_dir(tmp_path)
    ops = run.entries.select(run.entries["created_ns"] > 0)
    assert run.ranks == (0,) and list(ops["op"][-3:]) == ["all_reduce"] * 3 and set(ops["input_sizes"][-3:]) == {"[[4]]"}


def test_dumped_when_the_block_raises_and_the_error_propagates(tmp_path, one_rank):
    with pytest.raises(ZeroDivisionError):
        with tracekit.profile(tmp_path, ranks=[], flight_recorder="json") as p:
            dist.all_reduce(torch.ones(2))
            1 / 0  # noqa: B018
    assert p.flight_dump == tmp_path / "_dump_0.json" and (tmp_path / "_dump_0.json").stat().st_size > 0
    assert read_flight_dir(tmp_path).dumps[0].form == "json"


def test_faults_are_problems_not_exceptions(tmp_path, one_rank):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with tracekit.profile(blocker / "out", ranks=[], flight_recorder=True) as p:
        dist.all_reduce(torch.ones(2))
    assert p.flight_dump is None and any("could not dump the Flight Recorder" in m for m in p.problems)
    assert not list(tmp_path.glob(".*partial"))
    with tracekit.profile(tmp_path / "b", ranks=[], flight_recorder="yaml") as q:
        pass
    assert q.flight_dump is None and any("expected True, 'pickle' or 'json'" in m for m in q.problems)


def test_enable_leaves_a_users_setting_alone(monkeypatch):
    monkeypatch.setenv(flight_recorder.BUFFER_ENV, "500")
    assert flight_recorder.enable() is None and os.environ[flight_recorder.BUFFER_ENV] == "500"
    monkeypatch.setenv(flight_recorder.BUFFER_ENV, "0")
    assert "off" in flight_recorder.enable()
    monkeypatch.delenv(flight_recorder.BUFFER_ENV)
    assert flight_recorder.enable() is None and os.environ[flight_recorder.BUFFER_ENV] == "2000"
