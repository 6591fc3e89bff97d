"""A real 2-process gloo run recorded with torch.profiler loads; its gloo spans are communication."""

import os

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.helpers.net import free_port
from tracekit.formats.comm_annotation import CommAnnotation
from tracekit.loader.loading import load
from tracekit.model.events import EventKind as K

pytestmark = pytest.mark.slow


def _worker(rank, port, out):
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    x = torch.randn(128, 128)
    dist.all_reduce(x)  # connection warm-up outside the profiled window
    trace = os.path.join(out, f"rank{rank}.trace.json")
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(trace),
    ) as prof:
        for step in range(3):
            y = x @ x
            ann = CommAnnotation(
                op="all_reduce",
                pg_name="0",
                pg_desc="default_pg",
                ranks="0,1",
                dtype="float32",
                in_nelems=y.numel(),
                out_nelems=y.numel(),
                in_bytes=y.numel() * 4,
                out_bytes=y.numel() * 4,
                seq=step,
            )
            with record_function(ann.format()):
                work = dist.all_reduce(y, async_op=True)
            x @ x  # compute while the all-reduce runs
            with record_function(CommAnnotation(op="all_reduce", pg_name="0", seq=step, is_wait=True).format()):
                work.wait()
            prof.step()
    dist.barrier()  # no rank tears gloo down while its peer's last collective is in flight
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("gloo"))
    mp.spawn(_worker, args=(free_port(), out), nprocs=2, join=True)
    return out


def test_gloo_run_loads_with_spans_as_communication(gloo_run):
    ts = load(gloo_run, executor="serial")
    assert ts.ranks == [0, 1] and ts.metadata.world_size == 2 and ts.metadata.backend == "gloo"
    for rank, table in ts:
        assert ts.info(rank).device_type == "cpu"
        comm = np.flatnonzero(table.mask_kind(K.COMM))
        names = set(table.decode("name_id")[comm])
        assert names == {"gloo:all_reduce"}
        # steps 1 and 2 are active (wait=0, warmup=1): one all-reduce each, linked to its annotation
        assert sorted(table["step"][comm].tolist()) == [1, 2]
        assert sorted(table["seq"][comm].tolist()) == [1, 2]
        assert set(table.decode("pg_desc_id")[comm]) == {"default_pg"}
        assert (table["in_bytes"][comm] == 128 * 128 * 4).all()
        # the spans run on gloo worker threads, not on the training thread
        steps = table.mask_kind(K.STEP)
        main_thread = set(table["stream"][steps].tolist())
        assert not set(table["stream"][comm].tolist()) & main_thread
        assert table.mask_kind(K.SYNC).sum() == 2 and table.mask_kind(K.CPU_OP).sum() > 0
