"""The replay against an independent oracle: a tiny simulator of one host thread launching kernels onto two
streams and synchronising, run once to make the 'measured' trace and again with scaled kernel durations. The
what-if on the measured trace must predict exactly what the simulator gives (same launch latency, same sync cost),
and scaling down never predicts a longer step."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers.tables import ev, table, traceset
from tracekit.analyzers.graph import whatif as whatif_module
from tracekit.analyzers.graph.build import build_graph
from tracekit.analyzers.graph.critical_path import critical_paths
from tracekit.analyzers.graph.whatif import replay, whatif

LATENCY, CALL, SYNC_COST, TAIL = 5, 4, 3, 10
HOST = dict(stream=1, device=-1)

actions = st.lists(
    st.one_of(
        st.tuples(st.just("op"), st.integers(1, 100).map(lambda x: 2 * x)),
        st.tuples(st.just("launch"), st.sampled_from([7, 8]), st.integers(1, 150).map(lambda x: 2 * x)),
        st.tuples(st.just("sync")),
        st.tuples(st.just("stream_sync"), st.sampled_from([7, 8])),
    ),
    min_size=1,
    max_size=30,
)


def simulate(acts, kernel_factor=1.0):
    """(rows, step time): kernels start at max(launch + LATENCY, their stream free); a sync returns SYNC_COST after
    max(its call, the device work it waits for). The step ends at the later of its host window's end and its last
    kernel's end (the analysis' wall_us)."""
    rows, t, free = [], 0, {7: 0, 8: 0}
    for corr, a in enumerate(acts, start=1):
        if a[0] == "op":
            rows.append(ev("CPU_OP", t, a[1], 0, name="aten::op", **HOST))
            t += a[1]
        elif a[0] == "launch":
            s, k = a[1], int(a[2] * kernel_factor)
            start = max(t + LATENCY, free[s])
            rows += [
                ev("RUNTIME", t, CALL, 0, name="cudaLaunchKernel", correlation=corr, **HOST),
                ev("KERNEL", start, k, 0, stream=s, device=0, name="k", correlation=corr),
            ]
            free[s] = start + k
            t += CALL
        else:
            s = a[1] if a[0] == "stream_sync" else -1
            done = free[s] if s >= 0 else max(free.values())
            end = max(t, done) + SYNC_COST
            name = "cudaStreamSynchronize" if s >= 0 else "cudaDeviceSynchronize"
            rows += [
                ev("RUNTIME", t, end - t, 0, name=name, correlation=corr, **HOST),
                ev("SYNC", t, end - t, 0, stream=s, device=0, name="Sync", correlation=corr),
            ]
            t = end
    rows.append(ev("STEP", 0, t + TAIL, 0, name="ProfilerStep#0", **HOST))
    return rows, max([t + TAIL, *free.values()])  # the step ends when its host window and its device work have


@settings(max_examples=60, deadline=None)
@given(actions)
def test_identity_replay_and_paths_are_exact(acts):
    rows, step = simulate(acts)
    ts = traceset({0: table(rows)}, device_type="cuda")
    g = build_graph(ts)
    start, _ = replay(g)
    assert (start == g.start).all()
    (p,) = critical_paths(ts, graph=g).steps
    assert p.length_ns == step and sum(p.by_kind_ns.values()) == step
    assert whatif(ts, graph=g).replay_error == 0.0


def _blocked(block_nodes, fn):
    """Run ``fn()`` with the replay cut into blocks of ``block_nodes`` nodes (and, below the default size, no
    attempt to solve a step as one block first)."""
    saved = whatif_module.BLOCK_NODES, whatif_module.SHALLOW_ROUNDS
    whatif_module.BLOCK_NODES = block_nodes
    if block_nodes < saved[0]:
        whatif_module.SHALLOW_ROUNDS = 1
    try:
        return fn()
    finally:
        whatif_module.BLOCK_NODES, whatif_module.SHALLOW_ROUNDS = saved


@settings(max_examples=60, deadline=None)
@given(actions, st.sampled_from([0.0, 0.5, 2.0]), st.sampled_from([1, 3, 4096]))
@example([("launch", 7, 8), ("launch", 8, 2), ("sync",)], 0.0, 4096)  # a device sync waits for every stream
def test_scaled_kernels_match_the_simulator(acts, factor, block_nodes):
    rows, step = simulate(acts)
    ts = traceset({0: table(rows)}, device_type="cuda")
    (pred,) = _blocked(block_nodes, lambda: whatif(ts, [f"kernel:.*={factor}"])).steps
    assert pred.measured_ns == step
    assert pred.predicted_ns == simulate(acts, factor)[1]
    if factor < 1:
        assert pred.predicted_ns <= step


# --- two ranks joined by all-reduces ---------------------------------------------------------------------

host_actions = st.lists(
    st.one_of(
        st.tuples(st.just("op"), st.integers(1, 100).map(lambda x: 2 * x)),
        st.tuples(st.just("launch"), st.just(7), st.integers(1, 150).map(lambda x: 2 * x)),
        st.tuples(st.just("stream_sync"), st.just(7)),
    ),
    max_size=6,
)
phases = st.lists(
    st.tuples(host_actions, host_actions, st.integers(1, 200).map(lambda x: 2 * x), st.booleans(), st.booleans()),
    min_size=1,
    max_size=8,
)
TP = dict(
    pg_name="1", pg_desc="tracekit:tp", pg_ranks="[0, 1]", group_size=2, coll_op="all_reduce", in_bytes=4096, out_bytes=4096
)


class _Rank:
    def __init__(self):
        self.rows, self.t, self.corr, self.free = [], 0, 0, {7: 0, 20: 0}

    def run(self, acts):
        for a in acts:
            self.corr += 1
            if a[0] == "op":
                self.rows.append(ev("CPU_OP", self.t, a[1], 0, name="aten::op", **HOST))
                self.t += a[1]
            elif a[0] == "launch":
                self.launch(a[1], a[2], "k")
            else:
                self.sync(a[1])

    def launch(self, s, k, name, **kw):
        start = max(self.t + LATENCY, self.free[s])
        self.rows += [
            ev("RUNTIME", self.t, CALL, 0, name="cudaLaunchKernel", correlation=self.corr, **HOST),
            ev("COMM" if kw else "KERNEL", start, k, 0, stream=s, device=0, name=name, correlation=self.corr, **kw),
        ]
        self.free[s] = start + k
        self.t += CALL
        return start

    def sync(self, s):
        self.corr += 1
        end = max(self.t, self.free[s]) + SYNC_COST
        self.rows += [
            ev("RUNTIME", self.t, end - self.t, 0, name="cudaStreamSynchronize", correlation=self.corr, **HOST),
            ev("SYNC", self.t, end - self.t, 0, stream=s, device=0, name="Sync", correlation=self.corr),
        ]
        self.t = end


def simulate_two(ph, transfer_factor=1.0):
    """An all-reduce on stream 20 starts on each rank at max(launch + LATENCY, stream free) and ends, on both,
    its transfer after the later of the two starts."""
    ranks = [_Rank(), _Rank()]
    for seq, (a0, a1, transfer, s0, s1) in enumerate(ph):
        for r, acts in zip(ranks, (a0, a1)):
            r.run(acts)
        # launch the collective on both ranks; the kernel's duration is known once both have arrived
        arrivals = [max(r.t + LATENCY, r.free[20]) for r in ranks]
        end = max(arrivals) + int(transfer * transfer_factor)
        for r, arrival in zip(ranks, arrivals):
            r.corr += 1
            r.launch(20, end - arrival, "ncclDevKernel_AllReduce", seq=seq, **TP)
        for r, s in zip(ranks, (s0, s1)):
            if s:
                r.sync(20)
    ends = [r.t + TAIL for r in ranks]
    tables = {
        i: table(r.rows + [ev("STEP", 0, e, 0, name="ProfilerStep#0", **HOST)]) for i, (r, e) in enumerate(zip(ranks, ends))
    }
    return traceset(tables, device_type="cuda"), max(ends + [f for r in ranks for f in r.free.values()])


@settings(max_examples=40, deadline=None)
@given(phases, st.sampled_from([0.0, 0.5, 2.0]), st.sampled_from([1, 5, 4096]))
def test_two_ranks_scaled_transfer_matches_the_simulator(ph, factor, block_nodes):
    ts, step = simulate_two(ph)
    g = build_graph(ts)
    start, _ = replay(g)
    assert (start == g.start).all()
    (p,) = critical_paths(ts, graph=g).steps
    assert p.length_ns == step and sum(p.by_kind_ns.values()) == step
    (pred,) = _blocked(block_nodes, lambda: whatif(ts, [f"comm:tp={factor}"], graph=g)).steps
    assert pred.measured_ns == step and pred.predicted_ns == simulate_two(ph, factor)[1]
