"""A real two-process gloo run: an injected host delay on one rank is found on the critical path, the path
crosses to that rank at the collective, the identity replay reproduces every step, and removing the delay or
the transfer predicts what it should.

Each rank profiles ProfilerSteps around tracekit-annotated all_reduces; in step LATE_STEP rank 1 spends
DELAY_S in a ``data_loader`` annotation (a sleep: no operator covers it, so it is a host gap inside it)."""

import os
import time

import pytest

from tests.helpers.gloo import busy
from tests.helpers.net import free_port
from tracekit.analyzers.comm.communication import CommAnalyzer, CommOptions
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import replay, whatif
from tracekit.loader.loading import LoadOptions, load

DELAY_S = 0.04
LATE_STEP = 2
STEPS = 3


def _worker(rank: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from tracekit.formats.comm_annotation import CommAnnotation

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    x = torch.ones(4096)
    dist.all_reduce(x)
    path = os.path.join(out, f"rank{rank}.trace.json")
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=STEPS),
        on_trace_ready=lambda p: p.export_chrome_trace(path),
    ) as prof:
        for step in range(STEPS + 1):
            busy(0.004)
            with record_function("data_loader"):
                if rank == 1 and step == LATE_STEP:
                    time.sleep(DELAY_S)
            for k in range(2):
                seq = 10 * step + k
                ann = CommAnnotation(
                    op="all_reduce",
                    pg_name="0",
                    pg_desc="tracekit:dp",
                    ranks="0,1",
                    dtype="float32",
                    in_nelems=4096,
                    out_nelems=4096,
                    in_bytes=4 * 4096,
                    out_bytes=4 * 4096,
                    seq=seq,
                )
                with record_function(ann.format()):
                    work = dist.all_reduce(x, async_op=True)
                with record_function(CommAnnotation(op="all_reduce", pg_name="0", seq=seq, is_wait=True).format()):
                    work.wait()
                busy(0.001)
            prof.step()
    dist.barrier()  # no rank tears gloo down while its peer's last collective is in flight
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("gloo-critical")
    mp.start_processes(_worker, args=(free_port(), str(out)), nprocs=2, start_method="spawn")
    return load([str(out)], options=LoadOptions(cache=False), executor="serial")


@pytest.mark.slow
def test_identity_replay_reproduces_every_node_and_step(traces):
    g = build_graph(traces)
    start, _ = replay(g)
    assert (start == g.start).all()
    r = whatif(traces, graph=g)
    assert len(r.steps) == STEPS and r.replay_error == 0.0
    assert all(s.predicted_ns == s.measured_ns for s in r.steps)


@pytest.mark.slow
def test_the_injected_delay_is_on_the_critical_path(traces):
    paths = {s.step: s for s in critical_paths(traces).steps}
    late = paths[min(paths) + LATE_STEP - 1]
    assert sum(late.by_kind_ns.values()) == late.length_ns
    on_rank1 = sum(
        s.dur_ns
        for s in late.segments
        if s.rank == 1 and s.kind == "host" and s.name in ("data_loader", "ProfilerStep#" + str(late.step))
    )
    assert on_rank1 >= 0.8 * DELAY_S * 1e9, late.segments
    if late.segments[-1].rank == 0:  # the step ends on rank 0: the path crosses to rank 1 at a collective
        assert any(c.from_rank == 0 and c.to_rank == 1 for c in late.crossings)
    assert "host on rank 1" in late.verdict


@pytest.mark.slow
def test_whatif_removes_the_delay_and_free_transfer_is_never_longer(traces):
    # both ranks ran on one host: one clock (the estimate's error on a loaded 2-core host would blur the step)
    same_clock = CommAnalyzer().run(traces, CommOptions(align_clocks=False))
    r = whatif(traces, ["annotation:data_loader=0"], comm=same_clock)
    late = r.steps[LATE_STEP - 1]
    saved = (late.measured_ns - late.predicted_ns) / 1e9
    assert 0.8 * DELAY_S <= saved <= 1.2 * DELAY_S, r.steps
    free = whatif(traces, ["comm:dp=0"])
    assert not free.notes
    assert all(s.predicted_ns <= s.measured_ns for s in free.steps)
    assert any(s.predicted_ns < s.measured_ns for s in free.steps)


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory):
    """tracekit's own reference workloads on 2 gloo processes: tp-sp, and dp with overlapped buckets."""
    from tracekit.collectors.workloads.config import WorkloadConfig
    from tracekit.collectors.workloads.runner import run_batch

    base = tmp_path_factory.mktemp("reference")
    shape = dict(layers=2, seq=32, batch=2, hidden=32, heads=4, steps=2, wait=1, warmup=1)
    configs = [WorkloadConfig(workload="tp-sp", **shape), WorkloadConfig(workload="dp", overlap=True, **shape)]
    run_batch([(c, base / f"{c.workload}-{c.overlap}") for c in configs])
    return {
        c.workload: load([str(base / f"{c.workload}-{c.overlap}")], options=LoadOptions(cache=False), executor="serial")
        for c in configs
    }


@pytest.mark.slow
@pytest.mark.parametrize(("workload", "dim"), [("tp-sp", "sp"), ("dp", "dp")])
def test_reference_workloads_replay_exactly_and_free_comm_helps(reference_runs, workload, dim):
    ts = reference_runs[workload]
    g = build_graph(ts)
    start, _ = replay(g)
    assert (start == g.start).all()
    assert whatif(ts, graph=g).replay_error == 0.0
    free = whatif(ts, [f"comm:{dim}=0"], graph=g)
    assert not free.notes and all(s.predicted_ns <= s.measured_ns for s in free.steps)
    paths = critical_paths(ts, graph=g).steps
    assert all(sum(p.by_kind_ns.values()) == p.length_ns for p in paths)
    if workload == "tp-sp":  # synchronous collectives: the host waits for every transfer (dp's are overlapped
        assert all(p.by_dimension_ns.get(dim, 0) > 0 for p in paths)  # and may all be hidden on a given run)
