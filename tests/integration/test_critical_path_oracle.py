"""tracekit's critical path and what-if against the independent oracle (tests/helpers/critical_path_oracle.py: raw
JSON, plain Python, networkx; no tracekit code) and against answers known by construction, on hand-built Kineto
traces of the cases issue 26 names: a GPU-bound stream, host-bound launches, a sync-bound step, a host that runs
ahead and then waits with no sync call, device work past the host window, a cross-rank chain, a trace without
ProfilerStep. Then the two on the GPU traces in tests/data: the same path length, split by kind, explained share
and host waits per step."""

from __future__ import annotations

import glob
import gzip
import json
import os
import warnings

import pytest

from tests.helpers import critical_path_oracle as oracle
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import whatif
from tracekit.loader.loading import LoadOptions, load

US = 1000
HOST, DEV = dict(pid=1, tid=1), dict(pid=0, tid=7)


def x(cat, name, ts, dur, where, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **where, "args": args}


def step(ts, dur, n=0):
    return x("user_annotation", f"ProfilerStep#{n}", ts, dur, HOST)


def op(name, ts, dur):
    return x("cpu_op", name, ts, dur, HOST)


def launch(ts, corr, dur=5):
    return x("cuda_runtime", "cudaLaunchKernel", ts, dur, HOST, correlation=corr)


def kern(name, ts, dur, corr, stream=7, **args):
    return x("kernel", name, ts, dur, dict(pid=0, tid=stream), correlation=corr, stream=stream, device=0, **args)


def write(tmp_path, events, rank=0, world=1, name="t.json.gz", **header):
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}], "traceEvents": events, **header}
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world, **header.pop("dist", {})}
    path = tmp_path / name
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return str(path)


def gpu_bound():
    """Five 300 µs kernels queued back to back (1 µs apart) from 30 µs; the host is done at 1,000 µs, the device at
    1,534 µs. gemm on k0, k2, k4. Host work before the first launch three times as long delays every launch by
    20 µs, and the queued device by as much."""
    ev = [step(0, 1000), op("aten::prep", 0, 10)] + [launch(10 * (i + 1), i + 1) for i in range(5)]
    ev += [kern("gemm" if i % 2 == 0 else "relu", 30 + 301 * i, 300, i + 1) for i in range(5)]
    known = dict(length=1534, by_kind=dict(host=30, compute=1500, idle=4), waits={})
    return ev, known, [("kernel:gemm=0.5", 1534 - 450), ("kernel:.*=0.5", 1000), ("annotation:aten::prep=3", 1534 + 20)]


def host_bound():
    """Short kernels launched between long host ops: the device waits for every launch."""
    ev = [step(0, 1000), op("aten::a", 0, 100), launch(100, 1), kern("k", 110, 5, 1), op("aten::b", 105, 195)]
    ev += [launch(300, 2), kern("k", 310, 5, 2), op("aten::c", 305, 695)]
    return (
        ev,
        dict(length=1000, by_kind=dict(host=1000), waits={}),
        [("kernel:.*=0.5", 1000), ("annotation:aten::c=0.5", 1000 - 347.5)],
    )


def sync_bound():
    """A 600 µs kernel the host waits for in cudaDeviceSynchronize (returns 5 µs after it ends)."""
    ev = [
        step(0, 700),
        launch(10, 1),
        kern("gemm", 30, 600, 1),
        x("cuda_runtime", "cudaDeviceSynchronize", 20, 615, HOST, correlation=2),
    ]
    ev += [op("aten::after", 635, 65)]
    return ev, dict(length=700, by_kind=dict(host=100, compute=600), waits={"sync_call": 1}), [("kernel:gemm=0.5", 400)]


def runs_ahead_then_waits():
    """Four 200 µs kernels queued from 30 µs; the host has no op from 50 µs until 835 µs, 5 µs after the last kernel
    ends (a wait no call records), then 65 µs of work. A host op before the wait slower by 20 µs moves nothing."""
    ev = [step(0, 900)] + [launch(10 * i, i + 1) for i in range(4)] + [op("aten::prep", 40, 10)]
    ev += [kern("gemm", 30 + 200 * i, 200, i + 1) for i in range(4)] + [op("aten::after", 835, 65)]
    known = dict(length=900, by_kind=dict(host=100, compute=800), waits={"host_gap": 1})
    return ev, known, [("kernel:gemm=0.5", 500), ("annotation:aten::prep=3", 900)]


def past_the_host_window():
    """The host window ends at 500 µs; the kernel it launched runs to 900 µs."""
    ev = [step(0, 500), launch(10, 1), kern("gemm", 30, 870, 1)]
    return ev, dict(length=900, by_kind=dict(host=30, compute=870), waits={}), [("kernel:gemm=0.5", 500)]


def no_profiler_step():
    ev = [op("aten::a", 0, 100), launch(100, 1), kern("gemm", 115, 285, 1)]
    ev += [x("cuda_runtime", "cudaDeviceSynchronize", 110, 295, HOST, correlation=2), op("aten::b", 405, 95)]
    return ev, dict(length=500, by_kind=dict(host=215, compute=285), waits={"sync_call": 1}), [("kernel:gemm=0", 215)]


CASES = [gpu_bound, host_bound, sync_bound, runs_ahead_then_waits, past_the_host_window, no_profiler_step]


def _tracekit(paths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = load(paths, options=LoadOptions(cache=False), executor="serial")
        return ts, critical_paths(ts)


def _kinds(d):
    return {k: v for k, v in d.items() if v}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_hand_built_case_has_its_known_path_in_both(case, tmp_path):
    events, known, whatifs = case()
    path = write(tmp_path, events)
    ts, paths = _tracekit([path])
    (p,) = paths.steps
    m = oracle.Model([path])
    (s,) = m.windows
    o = m.path(s)
    assert p.length_ns == o.length_ns == known["length"] * US
    assert _kinds(p.by_kind_ns) == _kinds(o.by_kind_ns) == {k: v * US for k, v in known["by_kind"].items()}
    assert p.host_waits == o.host_waits == known["waits"]
    assert p.unexplained_ns == o.unexplained_ns == 0
    for spec, want in whatifs:
        (pred,) = whatif(ts, [spec]).steps
        kind, _, rest = spec.partition(":")
        key, _, f = rest.rpartition("=")
        if kind == "kernel":
            theirs = oracle.predicted([path], s, kernel=key, factor=float(f))
        else:
            theirs = m.step_time(s, lambda n, key=key, f=float(f): f if n.chain[0] == "host" and _inside(n, key) else 1.0)
        assert pred.predicted_ns == theirs == round(want * US), spec


def _inside(node, name) -> bool:
    op = getattr(node, "op", None)
    return op is not None and op.name == name


def test_a_cross_rank_chain(tmp_path):
    """Rank 0 arrives 300 µs late at an all-reduce; rank 1 waits, then works until 1,100 µs: the path runs through
    rank 0's host work, crosses to rank 1 at the all-reduce's last arrival and ends there."""
    pg = {"Process Group Name": "1", "Process Group Description": "tp", "Process Group Ranks": "[0, 1]", "Group size": 2}
    coll = dict(collective_name="allreduce", **{"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024})
    paths = []
    for r, (arrive, end) in enumerate(((400, 1000), (100, 1100))):
        ev = [
            step(0, end),
            op("aten::work", 0, arrive),
            launch(arrive, 1),
            kern("ncclDevKernel_AllReduce_Sum", arrive + 10, 600 - arrive - 10, 1, stream=20, Seq=0, **pg, **coll),
        ]
        ev += [x("cuda_runtime", "cudaStreamSynchronize", arrive + 5, 600 - arrive, HOST, correlation=2)]
        ev += [
            x("cuda_sync", "Stream Sync", arrive + 6, 600 - arrive - 2, dict(pid=0, tid=20), correlation=2, stream=20, device=0)
        ]
        ev += [op("aten::tail", 605, end - 605)]
        paths.append(write(tmp_path, ev, rank=r, world=2, name=f"r{r}.json.gz"))
    ts, cp = _tracekit(paths)
    (p,) = cp.steps
    m = oracle.Model(paths)
    o = m.path(0)
    assert p.length_ns == o.length_ns == 1100 * US
    assert _kinds(p.by_kind_ns) == _kinds(o.by_kind_ns) == {"host": 910 * US, "comm_transfer": 190 * US}
    assert [(c.from_rank, c.to_rank) for c in p.crossings] == [(1, 0)]
    (free,) = whatif(ts, [f"comm:{next(iter(p.by_dimension_ns))}=0"]).steps
    assert free.predicted_ns == m.step_time(0, lambda n: 0.0 if n.kind == "comm_transfer" else 1.0) == 910 * US


DATA = os.path.join(os.path.dirname(__file__), "..", "data")
GPU = sorted(p for p in glob.glob(os.path.join(DATA, "kineto-gpu*", "*.json.gz")) if "cpu-only" not in p)


@pytest.mark.slow
@pytest.mark.parametrize("path", GPU, ids=os.path.basename)
def test_oracle_and_tracekit_agree_on_every_gpu_trace(path):
    _, paths = _tracekit([path])
    m = oracle.Model([path])
    assert sorted(m.windows) == [s.step for s in paths.steps]
    for p in paths.steps:
        o = m.path(p.step)
        assert p.length_ns == o.length_ns, p.step
        for k in oracle.KINDS:
            assert abs(p.by_kind_ns[k] - o.by_kind_ns[k]) <= 1e-3 * p.length_ns, (p.step, k, p.by_kind_ns, o.by_kind_ns)
        assert abs(p.unexplained_ns - o.unexplained_ns) <= 1e-3 * p.length_ns
        assert p.host_waits == o.host_waits
