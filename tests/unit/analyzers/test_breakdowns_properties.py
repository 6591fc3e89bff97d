"""Property tests: the vectorised busy partition and idle split agree with a brute force over every ns."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.tables import ev, table
from tracekit.analyzers.breakdowns.device_scope import scope
from tracekit.analyzers.breakdowns.idle import idle_breakdown
from tracekit.analyzers.breakdowns.kernels import PARTS, busy_partition

KINDS = {"KERNEL": 1, "COMM": 2, "MEMCPY": 4, "MEMSET": 4}
WINDOW = 80
SLACK = 3

activity = st.tuples(
    st.sampled_from(sorted(KINDS)),
    st.integers(0, 70),
    st.integers(0, 15),
    st.sampled_from([7, 13]),
    st.one_of(st.none(), st.integers(0, 70)),
)


def build(acts):
    rows = [ev("STEP", 0, WINDOW, step=0, stream=1)]
    for i, (kind, ts, dur, stream, launch_end) in enumerate(acts):
        rows.append(ev(kind, ts, dur, 0, stream=stream, correlation=i))
        if launch_end is not None:
            rows.append(ev("RUNTIME", max(0, launch_end - 2), min(2, launch_end), 0, stream=1, correlation=i))
    return rows


def brute_idle(acts):
    n = len(acts)
    start = [a[1] for a in acts]
    end = [a[1] + a[2] for a in acts]
    launch = [a[4] for a in acts]
    order = sorted(range(n), key=lambda i: (acts[i][3], start[i], i))
    prev = {}
    for pos, i in enumerate(order):
        earlier = [end[j] for j in order[:pos] if acts[j][3] == acts[i][3]]
        prev[i] = min(max(earlier), start[i]) if earlier else start[i]
    held = []
    for i in range(n):
        if launch[i] is None:
            continue
        gap_from = max(launch[i], prev[i])
        others = [end[j] for j in range(n) if acts[j][3] != acts[i][3] and end[j] <= start[i]]
        if others and gap_from < start[i] and max(others) > gap_from and start[i] - max(others) <= SLACK:
            held.append((gap_from, start[i]))
    idle = host = dep = 0
    for t in range(WINDOW):
        if any(s <= t < e for s, e in zip(start, end)):
            continue
        idle += 1
        pending = any(launch[i] is not None and launch[i] <= t < start[i] for i in range(n))
        unknown = any(launch[i] is None and prev[i] <= t < start[i] for i in range(n))
        if not pending and not unknown:
            host += 1
        elif any(a <= t < b for a, b in held):
            dep += 1
    return idle, host, dep, idle - host - dep


@settings(max_examples=150, deadline=None)
@given(st.lists(activity, min_size=1, max_size=8))
def test_idle_split_matches_brute_force(acts):
    ib = idle_breakdown(scope(table(build(acts))), 0, slack_ns=SLACK)
    d = ib.totals
    assert (d.idle_ns, d.host_wait_ns, d.dependency_wait_ns, d.other_ns) == brute_idle(acts)


@settings(max_examples=150, deadline=None)
@given(st.lists(activity, min_size=1, max_size=10), st.integers(0, 3))
def test_busy_partition_matches_brute_force(acts, seed):
    bp = busy_partition(scope(table(build(acts), seed)), 0)
    expected = dict.fromkeys(PARTS.values(), 0)
    for t in range(0, 90):
        mask = 0
        for kind, ts, dur, _, _ in acts:
            if ts <= t < ts + dur:
                mask |= KINDS[kind]
        if mask:
            expected[PARTS[mask]] += 1
    assert dict(bp.parts_ns) == expected
    assert bp.busy_ns == sum(expected.values())
