"""Critical path and what-if replay on hand-built traces whose longest path is known by construction."""

import pytest

from tests.helpers.tables import ev, table, traceset
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import Spec, replay, whatif
from tracekit.errors import ConfigError

HOST = dict(stream=1, device=-1)


def rt(name, ts, dur, corr, step=0):
    return ev("RUNTIME", ts, dur, step, name=name, correlation=corr, **HOST)


def op(name, ts, dur, step=0):
    return ev("CPU_OP", ts, dur, step, name=name, **HOST)


def kernel(name, ts, dur, corr, stream=7, step=0):
    return ev("KERNEL", ts, dur, step, stream=stream, device=0, name=name, correlation=corr)


def one_rank():
    """Launch K1 (queued from t=30, 300 ns) and K2 (behind it, 200 ns), wait for the device, then 300 ns of host
    work. Longest path: host 0-10, launch latency 10-30, K1, K2, the sync's return 530-560, host 560-1000."""
    return traceset(
        {
            0: table(
                [
                    ev("STEP", 0, 1000, 0, name="ProfilerStep#0", **HOST),
                    rt("cudaLaunchKernel", 10, 10, 1),
                    kernel("gemm_K1", 30, 300, 1),
                    rt("cudaLaunchKernel", 40, 10, 2),
                    kernel("relu_K2", 330, 200, 2),
                    rt("cudaDeviceSynchronize", 60, 500, 3),
                    ev("SYNC", 61, 498, 0, stream=-1, device=0, name="Context Sync", correlation=3),
                    op("aten::B", 600, 300),
                ],
                shuffle_seed=1,
            )
        },
        device_type="cuda",
    )


def test_single_rank_longest_path_is_known():
    (s,) = critical_paths(one_rank()).steps
    assert s.length_ns == 1000
    assert s.by_kind_ns == {"compute": 500, "comm_transfer": 0, "comm_wait": 0, "host": 500, "memcpy": 0, "idle": 0}
    names = [(x.name, x.start_ns, x.dur_ns) for x in s.segments]
    assert names == [
        ("ProfilerStep#0", 0, 10),
        ("(launch latency)", 10, 20),
        ("gemm_K1", 30, 300),
        ("relu_K2", 330, 200),
        ("cudaDeviceSynchronize", 530, 30),
        ("ProfilerStep#0", 560, 40),
        ("aten::B", 600, 300),
        ("ProfilerStep#0", 900, 100),
    ]
    assert sum(x.dur_ns for x in s.segments) == s.length_ns


def test_replay_of_the_unchanged_graph_reproduces_every_node():
    g = build_graph(one_rank())
    start, _ = replay(g)
    assert (start == g.start).all()
    r = whatif(one_rank())
    assert r.replay_error == 0.0 and [(x.measured_ns, x.predicted_ns) for x in r.steps] == [(1000, 1000)]


@pytest.mark.parametrize(
    ("spec", "predicted"),
    [
        ("kernel:K1=0.5", 850),  # K2 starts when K1 ends: 180; the sync returns at 380 + 30
        ("kernel:.*=0", 530),  # K2 waits for its own launch (40 + 20 of latency); host time stays
        ("kernel:K1=2", 1300),  # the host waits 300 ns longer
        ("annotation:aten::B=0", 700),
        ("rank:0:host=0.5", 760),  # K1 starts at 5 + 20 (latencies stay), K2 ends at 525, then 230 of host halved
    ],
)
def test_whatif_predictions(spec, predicted):
    (s,) = whatif(one_rank(), [spec]).steps
    assert (s.measured_ns, s.predicted_ns) == (1000, predicted)


def _coll(ts, dur, seq, corr):
    return ev(
        "COMM",
        ts,
        dur,
        0,
        stream=20,
        device=0,
        name="ncclDevKernel_AllReduce",
        correlation=corr,
        coll_op="all_reduce",
        seq=seq,
        in_bytes=4096,
        out_bytes=4096,
        pg_name="1",
        pg_desc="tracekit:tp",
        pg_ranks="[0, 1]",
        group_size=2,
    )


def _stream_sync(ts, dur, corr):
    return [
        rt("cudaStreamSynchronize", ts, dur, corr),
        ev("SYNC", ts + 1, dur - 2, 0, stream=20, device=0, name="Stream Sync", correlation=corr),
    ]


def two_ranks():
    """Rank 1 is late for all-reduce 0 (400 ns of host work first), rank 0 for all-reduce 1 (390 ns of host
    work after waiting for all-reduce 0). The step's end is rank 1's (1800), and the longest path runs
    rank 1 -> rank 0 -> rank 1."""
    r0 = [
        ev("STEP", 0, 1500, 0, name="ProfilerStep#0", **HOST),
        rt("cudaLaunchKernel", 100, 10, 1),
        _coll(115, 485, 0, 1),
        *_stream_sync(120, 490, 2),
        op("aten::H0", 610, 390),
        rt("cudaLaunchKernel", 1000, 10, 3),
        _coll(1015, 285, 1, 3),
        *_stream_sync(1020, 290, 4),
    ]
    r1 = [
        ev("STEP", 0, 1800, 0, name="ProfilerStep#0", **HOST),
        op("aten::H1", 0, 400),
        rt("cudaLaunchKernel", 400, 10, 1),
        _coll(420, 180, 0, 1),
        *_stream_sync(410, 195, 2),
        rt("cudaLaunchKernel", 610, 10, 3),
        _coll(625, 675, 1, 3),
        *_stream_sync(620, 685, 4),
        op("aten::H2", 1305, 495),
    ]
    return traceset({0: table(r0), 1: table(r1, shuffle_seed=2)}, device_type="cuda")


def test_cross_rank_path_changes_rank_twice():
    (s,) = critical_paths(two_ranks()).steps
    assert s.length_ns == 1800
    assert s.by_kind_ns["comm_transfer"] == 180 + 285 and s.by_kind_ns["host"] == 1800 - 465
    assert s.by_dimension_ns == {"tp": 465}
    ranks = [x.rank for x in s.segments if x.dur_ns]
    changes = [(a, b) for a, b in zip(ranks, ranks[1:]) if a != b]
    assert changes == [(1, 0), (0, 1)]
    named = [(x.rank, x.name, x.start_ns, x.dur_ns) for x in s.segments]
    assert (1, "aten::H1", 0, 400) in named and (0, "aten::H0", 610, 390) in named
    assert (0, "ncclDevKernel_AllReduce", 420, 180) in named and (1, "ncclDevKernel_AllReduce", 1015, 285) in named
    assert [(c.from_rank, c.to_rank) for c in s.crossings] == [(1, 0), (0, 1)]
    assert "waits for rank" in s.verdict and "tp all_reduce transfer" in s.verdict


def test_cross_rank_whatif():
    ts = two_ranks()
    r = whatif(ts)
    assert r.replay_error == 0.0
    (free,) = whatif(ts, ["comm:tp=0"]).steps
    # both transfers free: rank 1 -> 420, rank 0 leaves its sync at 430, arrives at 820+15, rank 1 ends at
    # 835 + 5 + 495
    assert free.predicted_ns == 1335
    (late,) = whatif(ts, ["annotation:aten::H1=0"]).steps  # rank 1 on time: rank 0's own path bounds the step
    assert late.predicted_ns < 1800
    with pytest.raises(ConfigError):
        Spec.parse("comm:tp=-1")
    with pytest.raises(ConfigError):
        Spec.parse("rank:x:host=1")


def test_a_gap_on_a_host_thread_is_host_time():
    ts = traceset(
        {0: table([ev("STEP", 0, 1000, 0, name="ProfilerStep#0", **HOST), op("a", 0, 100), op("b", 700, 300)])},
        device_type="cuda",
    )
    (s,) = critical_paths(ts).steps
    assert s.by_kind_ns["host"] == 1000
    assert ("ProfilerStep#0", 100, 600) in [(x.name, x.start_ns, x.dur_ns) for x in s.segments]


def test_a_stream_wait_makes_the_waiting_stream_follow_the_other():
    """cudaStreamWaitEvent: B on stream 8 waits for A on stream 7, then the host synchronises with stream 8."""
    ts = traceset(
        {
            0: table(
                [
                    ev("STEP", 0, 2000, 0, name="ProfilerStep#0", **HOST),
                    rt("cudaLaunchKernel", 10, 10, 1),
                    kernel("A", 20, 1000, 1),
                    rt("cudaStreamWaitEvent", 30, 5, 2),
                    ev("SYNC", 32, 1, 0, stream=8, device=0, name="Stream Wait Event", correlation=2),
                    rt("cudaLaunchKernel", 40, 10, 3),
                    kernel("B", 1020, 100, 3, stream=8),
                    rt("cudaStreamSynchronize", 60, 1070, 4),
                    ev("SYNC", 61, 1068, 0, stream=8, device=0, name="Stream Sync", correlation=4),
                ]
            )
        },
        device_type="cuda",
    )
    (s,) = critical_paths(ts).steps
    assert [x.name for x in s.segments if x.kind == "compute"] == ["A", "B"]
    assert s.by_kind_ns["compute"] == 1100
    (half,) = whatif(ts, ["kernel:^A$=0.5"]).steps
    assert half.predicted_ns == 2000 - 500


def _blocked(own_kernel_only: bool):
    rows = [ev("STEP", 0, 1_000_000, 0, name="ProfilerStep#0", **HOST)]
    if not own_kernel_only:  # K1 was queued before; the second launch returns when it finishes (queue full)
        rows += [rt("cudaLaunchKernel", 10, 10, 1), kernel("K1", 30, 500_000, 1)]
    # a 400 µs launch whose own kernel ends just before it returns (lazy module loading: host time)
    rows += [
        rt("cudaLaunchKernel", 100_000, 430_002, 2),
        kernel("K2", 530_000 if own_kernel_only else 530_030, 0 if own_kernel_only else 5, 2),
    ]
    rows += [op("aten::after", 530_002, 400_000)]
    return traceset({0: table(rows)}, device_type="cuda")


def test_a_blocked_launch_waits_for_earlier_device_work_only():
    (s,) = critical_paths(_blocked(own_kernel_only=False)).steps
    assert s.by_kind_ns["compute"] == 500_000  # K1 is on the path: the launch waited for it
    (half,) = whatif(_blocked(own_kernel_only=False), ["kernel:K1=0.5"]).steps
    assert half.predicted_ns == 1_000_000 - 250_000
    (own,) = critical_paths(_blocked(own_kernel_only=True)).steps
    assert own.by_kind_ns["compute"] == 0 and own.by_kind_ns["host"] == 1_000_000


def test_overlapping_activities_on_a_stream_keep_the_sums_exact():
    ts = traceset(
        {
            0: table(
                [
                    ev("STEP", 0, 1000, 0, name="ProfilerStep#0", **HOST),
                    rt("cudaLaunchKernel", 10, 10, 1),
                    kernel("K1", 30, 300, 1),
                    rt("cudaLaunchKernel", 40, 10, 2),
                    kernel("K2", 329, 200, 2),  # starts 1 ns before K1 ends (rounding)
                    rt("cudaDeviceSynchronize", 60, 500, 3),
                ]
            )
        },
        device_type="cuda",
    )
    (s,) = critical_paths(ts).steps
    assert sum(s.by_kind_ns.values()) == s.length_ns == 1000
    assert ("(gap)", -1) in [(x.name, x.dur_ns) for x in s.segments]
    assert whatif(ts).replay_error == 0.0


def test_the_analyzer_protocol_gives_the_same_paths():
    from tracekit.analyzers.graph.whatif_table import CriticalPathAnalyzer, CriticalPathOptions
    from tracekit.analyzers.registry import Analyzer

    a = CriticalPathAnalyzer()
    assert isinstance(a, Analyzer) and a.needs == ("comm", "steps")
    assert a.run(two_ranks()).paths.to_dict() == critical_paths(two_ranks()).to_dict()
    assert a.run(two_ranks(), CriticalPathOptions(critical_path=False)) is None


def test_the_critical_path_of_a_whatif():
    (s,) = critical_paths(one_rank(), specs=["kernel:K1=0.5"]).steps
    assert s.length_ns == 850 and sum(s.by_kind_ns.values()) == 850
    assert s.by_kind_ns["compute"] == 150 + 200 and s.by_kind_ns["host"] == 500
    (free,) = critical_paths(two_ranks(), specs=["comm:tp=0"]).steps
    assert free.length_ns == 1335 and free.by_kind_ns["comm_transfer"] == 0


def test_host_pieces_on_many_threads_are_attributed_to_their_innermost_op():
    """Six host threads, each an outer op with one inner op at a different time. Every host piece of the graph is
    checked against a brute-force oracle (the latest-starting op of its own thread that covers it). Before, the
    (thread, nesting level, time) keys were packed with fixed strides that wrapped int64 from the fifth thread on,
    so thread 4's pieces were looked up among thread 0's ops."""
    rows = [ev("STEP", 0, 1000, 0, name="ProfilerStep#0", stream=1, device=-1)]
    for k in range(1, 7):
        rows += [
            ev("CPU_OP", 10, 980, 0, name=f"outer_{k}", stream=100 + k, device=-1),
            ev("CPU_OP", 100 * k, 50, 0, name=f"inner_{k}", stream=100 + k, device=-1),
        ]
    ts = traceset({0: table(rows, shuffle_seed=3)}, device_type="cuda")
    g = build_graph(ts)
    t = ts.table(0)
    host = [i for i in range(len(g.chain)) if g.row[i] >= 0 and t["device"][g.row[i]] < 0]
    checked = 0
    for i in host:
        lane, s = g.chain_lane[g.chain[i]], int(g.start[i]) + g.shifts[0]
        covering = [j for j in range(len(t)) if t["stream"][j] == lane and t["ts_ns"][j] <= s < t.end_ns[j]]
        want = max(covering, key=lambda j: (t["ts_ns"][j], -t.end_ns[j]))
        name = lambda j: t.string(int(t["name_id"][j]))
        assert name(g.row[i]) == name(want), (lane, s)
        checked += lane > 100
    assert checked >= 18  # three pieces on each of the six threads


def test_a_timestamp_decades_from_the_others_is_one_line_not_a_traceback():
    rows = [ev("STEP", 10**18, 1000, 0, name="ProfilerStep#0", stream=1, device=-1)]
    rows += [ev("CPU_OP", 10**18 + 10 * k, 5, 0, name=f"op{k}", stream=k, device=-1) for k in range(1, 8)]
    rows += [ev("CPU_OP", 0, 5, -1, name="stray", stream=3, device=-1)]
    g = None
    try:
        g = build_graph(traceset({0: table(rows)}, device_type="cuda"))
    except Exception as exc:  # a one-line TracekitError is what a user may see; never an IndexError
        from tracekit.errors import TracekitError

        assert isinstance(exc, TracekitError) and "\n" not in str(exc), repr(exc)
    if g is not None:  # the stray event lies outside the only step: no need to order it with the rest
        assert len(g.chain)


ENGINE = dict(stream=2, device=-1)


def backward_on_engine_thread():
    """As PyTorch on GPUs: the main thread (1) runs the forward (aten::F, 0-300), then waits in backward() with no op
    of its own while the autograd engine's thread (2) runs the backward (MmBackward0 320-520, AddBackward0 520-800);
    it resumes at 800, returns at 850 and steps the optimizer (850-950). Longest path: F, the engine's start
    (300-320), both backward ops, the main thread from 800 on."""
    return traceset(
        {
            0: table(
                [
                    ev("STEP", 0, 1000, 0, name="ProfilerStep#0", **HOST),
                    op("aten::F", 0, 300),
                    ev("CPU_OP", 320, 200, 0, name="autograd::engine::evaluate_function: MmBackward0", **ENGINE),
                    ev("CPU_OP", 520, 280, 0, name="autograd::engine::evaluate_function: AddBackward0", **ENGINE),
                    op("Optimizer.step#SGD.step", 850, 100),
                ],
                shuffle_seed=3,
            )
        },
        device_type="cuda",
    )


def test_the_path_runs_through_the_autograd_engine_thread():
    (s,) = critical_paths(backward_on_engine_thread()).steps
    assert s.length_ns == 1000 and sum(x.dur_ns for x in s.segments) == 1000
    named = [(x.lane, x.name, x.start_ns, x.dur_ns) for x in s.segments if x.dur_ns]
    assert named == [
        ("thread 1", "aten::F", 0, 300),
        ("", "(dependency)", 300, 20),
        ("thread 2", "autograd::engine::evaluate_function: MmBackward0", 320, 200),
        ("thread 2", "autograd::engine::evaluate_function: AddBackward0", 520, 280),
        ("thread 1", "ProfilerStep#0", 800, 50),
        ("thread 1", "Optimizer.step#SGD.step", 850, 100),
        ("thread 1", "ProfilerStep#0", 950, 50),
    ]


@pytest.mark.parametrize(
    ("spec", "predicted"),
    [
        ("annotation:autograd::engine::evaluate_function: MmBackward0=0", 800),  # the caller resumes 200 ns earlier
        ("annotation:aten::F=0.5", 850),  # the backward starts 150 ns earlier
        ("annotation:autograd::engine::evaluate_function: AddBackward0=2", 1280),  # the caller waits 280 ns longer
    ],
)
def test_whatif_on_the_autograd_engine_thread(spec, predicted):
    r = whatif(backward_on_engine_thread(), [spec])
    assert r.replay_error == 0.0 and not r.notes
    assert [(x.measured_ns, x.predicted_ns) for x in r.steps] == [(1000, predicted)]
