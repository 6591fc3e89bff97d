"""A dependency graph over all ranks: chains of nodes (host threads, device streams, gloo worker threads)
plus edges between chains (launch, host synchronisation, stream waits, gloo issue/wait, cross-rank arrival).

Node times are measured, on the reference rank's clock (the clock offsets of tracekit.analyzers.comm.clocks are
subtracted), in ns relative to ``base_ns``. Replaying the graph (tracekit.analyzers.graph.whatif) computes, in chain
order, ``start[j] = max(start[j-1] + dur[j-1] + gap[j], fixed[j], max over edges e into j of
(start[src] + anchor_end * dur[src] + delay[e]))``. The input that bound each node is chosen from evidence
(tracekit.analyzers.graph.evidence): the latest to finish, within a tolerance of the node's start; it carries the
residual up to the measured start (a launch latency, a kernel-to-kernel gap), the others their natural delay,
unclipped, so that an edge the measurement contradicts shows as an identity-replay error.

Host threads are cut into *pieces*: the time between consecutive boundaries of the thread's ops, each
attributed to its innermost op (the leaf that matters) or to nobody (a gap: host time too, where a data
loader, a Python stall or an injected delay shows up). A host synchronisation is cut where the device work it
waited for ended; the pieces before that cut are waiting (no own duration), the piece after it starts when the
device work ends (plus the measured return latency). The same holds for the waits inferred without a sync call
(tracekit.analyzers.graph.host_waits: scalar reads, allocator calls, gaps that end when the busy device's work
does), each edge with the rule that found it.
"""

from __future__ import annotations

import warnings

import numpy as np

from ...errors import EmptyWindowError
from ...model.events import EventKind, EventTable
from ...model.traceset import TraceSet
from .evidence import residuals
from .host_edges import autograd_waits, gloo_issues, gloo_waits, host_syncs, lookup, piece_at, pieces, stream_waits
from .host_waits import call_waits, gap_waits
from .structure import (
    ALLOCATOR,
    ARRIVE,
    BARRIER_CHAIN,
    BLOCKING_CALL,
    CHAIN_GAP_KIND,
    COMPUTE,
    DEVICE_CHAIN,
    DEVICE_NODE_KINDS,
    EDGE_KIND,
    GLOO_WAIT,
    HOST,
    HOST_CHAIN,
    HOST_GAP,
    HOST_KINDS,
    HOST_SYNC_CALLS,
    IDLE,
    ISSUE,
    KINDS,
    LAUNCH,
    MEMCPY,
    NEG,
    RELEASE,
    SCALAR_READ,
    STREAM_WAIT,
    SYNC,
    SYNC_CALL,
    TRANSFER,
    WAIT,
    WORKER_CHAIN,
    Graph,
    Window,
)
from .structure import Parts as _Parts
from .windows import plan_windows, window_nodes

__all__ = [
    "ARRIVE",
    "BARRIER_CHAIN",
    "CHAIN_GAP_KIND",
    "COMPUTE",
    "DEVICE_CHAIN",
    "EDGE_KIND",
    "GLOO_WAIT",
    "HOST",
    "HOST_CHAIN",
    "IDLE",
    "ISSUE",
    "KINDS",
    "LAUNCH",
    "MEMCPY",
    "NEG",
    "RELEASE",
    "STREAM_WAIT",
    "SYNC",
    "TRANSFER",
    "WAIT",
    "WORKER_CHAIN",
    "Graph",
    "Window",
    "build_graph",
]


def build_graph(traces: TraceSet, windows: str | None = None, comm=None) -> Graph:
    """The graph of the whole trace set. ``windows``: None for ProfilerStep#N windows, or the name of an
    annotation whose instances (in time order, numbered from 0) are the windows. ``comm``: a CommResult
    (tracekit.analyzers.comm.communication) to reuse, run with the same ``window``; computed when None. The step
    windows are the analysis' (tracekit.analyzers.graph.windows): each ends where the step's device work does."""
    from ..comm.communication import CommAnalyzer, CommOptions

    comm = comm if comm is not None else CommAnalyzer().run(traces, CommOptions(window=windows, allow_empty=True))
    offsets = {o.rank: int(round(o.offset_ns)) for o in comm.cross.offsets}
    base = min((int(t["ts_ns"].min()) - offsets.get(r, 0) for r, t in traces if len(t)), default=0)
    parts = _Parts()
    notes: list[str] = []
    comm_nodes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # rank -> (rows, W ids, T ids)
    rank_windows: list[tuple] = []  # (rank, step ids, starts, host ends, ends, complete)
    shifts = {r: base + offsets.get(r, 0) for r in traces.ranks}
    plans = {r.rank: r.plan for r in comm.ranks if r.plan is not None}
    for r, table in traces:
        shift = shifts[r]
        step = plans[r].step if r in plans and len(plans[r].step) == len(table) else table["step"]  # the analysis' steps
        comm_nodes[r] = _rank(parts, r, table, traces.info(r).device_type, shift, notes, step)
        if r in plans:
            rank_windows.append((r, *plan_windows(plans[r], shift)))
    _cross_rank(parts, comm, comm_nodes, traces)
    g = _assemble(parts, rank_windows, base, shifts, notes)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return g


def _rank(parts: _Parts, r: int, t: EventTable, device_type: str, shift: int, notes: list[str], step: np.ndarray):
    ts, end, dev, lane = t["ts_ns"] - shift, t.end_ns - shift, t["device"], t["stream"]
    dev_rows = np.flatnonzero(t.mask_kind(*DEVICE_NODE_KINDS) & (dev >= 0))
    worker_rows = np.flatnonzero(t.mask_kind(EventKind.COMM) & (dev < 0))
    workers = np.unique(lane[worker_rows])
    host_rows = np.flatnonzero(t.mask_kind(*HOST_KINDS) & (dev < 0) & ~np.isin(lane, workers) & (t["dur_ns"] > 0))
    # device streams and gloo worker threads: one node per activity (a collective: arrival W + transfer T)
    d_ids, w_ids, t_ids, d_rows = _device_nodes(parts, r, t, ts, end, dev_rows, worker_rows, step)
    d_end = _end_node(d_ids, t_ids)
    syncs, more_syncs = host_syncs(t, ts, end, host_rows, d_rows, d_end)
    sync_rule = np.where(_name_matches(t, syncs[3], HOST_SYNC_CALLS), SYNC_CALL, BLOCKING_CALL)
    on_dev = dev[d_rows] >= 0  # device activities (not gloo worker spans)
    scalar, alloc = call_waits(t, ts, end, host_rows, d_rows[on_dev], d_end[on_dev])
    scalar = _new_cuts(syncs, scalar, ts)
    alloc = _new_cuts(tuple(np.concatenate([a, b]) for a, b in zip(syncs, scalar)), alloc, ts)
    waited_gloo, idle_gloo = gloo_waits(t, ts, end, host_rows, d_rows, t_ids)
    ag_lane, ag_from, ag_cut, ag_engine, ag_first = autograd_waits(t, ts, end, host_rows)
    gaps = gap_waits(t, ts, end, host_rows, d_rows[on_dev], d_end[on_dev], exclude=(ag_lane, ag_from, ag_cut))
    calls = [syncs, scalar, alloc, waited_gloo]
    cuts = np.concatenate([c[1] for c in calls] + [ag_cut, gaps[1]])
    cut_lane = np.concatenate([c[2] for c in calls] + [ag_lane, gaps[2]])
    call_rows = np.concatenate([c[3] for c in calls])
    waits = (np.concatenate([ag_lane, gaps[2]]), np.concatenate([ag_from, gaps[3]]), np.concatenate([ag_cut, gaps[1]]))
    pid, pstart, plane = pieces(parts, r, t, ts, end, host_rows, cuts, cut_lane, call_rows, device_type, waits=waits)
    _autograd_edges(parts, pid, pstart, plane, ag_lane, ag_from, ag_cut, ag_engine, ag_first)
    _launch_edges(parts, r, t, ts, host_rows, d_rows, d_ids, pid, pstart, plane, notes, len(dev_rows))
    # host waits for the device: device end -> the piece that starts where the wait was cut
    zero = np.zeros(1, np.int64)
    host_waits = (
        (syncs[:3], zero, SYNC, sync_rule),
        (scalar[:3], zero, SYNC, SCALAR_READ),
        (alloc[:3], zero, SYNC, ALLOCATOR),
        (gaps[:3], zero, SYNC, HOST_GAP),
        (waited_gloo[:3], zero, GLOO_WAIT, -1),
        (more_syncs[:3], more_syncs[3], SYNC, -1),
        (idle_gloo[:3], zero, GLOO_WAIT, -1),
    )
    for (dep_node, cut, cl), natural, etype, rule in host_waits:
        if len(cut):
            dst = piece_at(pid, pstart, plane, cl, cut)
            ok = dst >= 0
            ok[ok] = pstart[dst[ok] - pid[0]] == cut[ok]  # a piece starts there (not past the thread's last op)
            rules = np.broadcast_to(rule, cut.shape)[ok]
            parts.add_edges(dep_node[ok], dst[ok], True, np.broadcast_to(natural, cut.shape)[ok], etype, rules)
    stream_waits(parts, t, ts, end, d_rows, d_ids, d_end)
    gloo_issues(parts, t, host_rows, worker_rows, d_rows, d_ids, w_ids, pid, pstart, plane, ts)
    comm_rows = d_rows[t_ids >= 0]
    return comm_rows, w_ids[t_ids >= 0], t_ids[t_ids >= 0]


def _launch_edges(parts, r, t, ts, host_rows, d_rows, d_ids, pid, pstart, plane, notes, n_device) -> None:
    """Runtime call (the host piece at its start) -> device activity with the same correlation; the natural delay
    is the rank's smallest positive launch latency (a collective's launch leads to its arrival W)."""
    corr, kind, lane = t["correlation"], t["kind"], t["stream"]
    launch_rows = host_rows[kind[host_rows] == EventKind.RUNTIME]
    lr = launch_rows[corr[launch_rows] >= 0]
    d_corr = corr[d_rows]
    order = np.argsort(corr[lr], kind="stable")
    pos = np.searchsorted(corr[lr][order], d_corr)
    ok = (pos < len(lr)) & (d_corr >= 0)
    pos = np.minimum(pos, max(len(lr) - 1, 0))
    ok &= corr[lr][order][pos] == d_corr if len(lr) else np.zeros(len(d_rows), bool)
    src_row = lr[order][pos[ok]]
    src_piece = piece_at(pid, pstart, plane, lane[src_row], ts[src_row])
    lat = ts[d_rows[ok]] - ts[src_row]
    natural = np.full(len(lat), int(np.min(lat[lat > 0])) if (lat > 0).any() else 0)
    keep = src_piece >= 0
    parts.add_edges(src_piece[keep], d_ids[ok][keep], False, natural[keep], LAUNCH)
    if n_device and not len(lr):
        notes.append(f"rank {r}: no launch correlations between host and device; device activities have no launch edges")


def _name_matches(t: EventTable, rows: np.ndarray, pattern) -> np.ndarray:
    hits = np.array([bool(pattern.match(s)) for s in t.strings] + [False], bool)
    nid = t["name_id"][rows]
    return hits[np.where(nid < 0, len(t.strings), nid)]


def _new_cuts(taken, found, ts):
    """``found`` (dep, cut, thread, row) without the cuts already in ``taken`` (a scalar read's own sync call) and
    once per (thread, cut) (``aten::item`` and the ``aten::_local_scalar_dense`` inside it wait for the same end)."""
    if not len(found[1]):
        return found
    seen = set(zip(taken[2].tolist(), taken[1].tolist()))
    keep = np.zeros(len(found[1]), bool)
    for i in np.argsort(-ts[found[3]], kind="stable").tolist():  # the innermost call (latest start) waits, not its callers
        key = (int(found[2][i]), int(found[1][i]))
        keep[i] = key not in seen
        seen.add(key)
    return tuple(x[keep] for x in found)


def _autograd_edges(parts: _Parts, pid, pstart, plane, lane, gap_from, cut, engine, first) -> None:
    """The caller's backward call -> the engine thread's first op (ISSUE), the engine's last op -> the caller's
    piece from the cut on (SYNC), for the stretches of graph_host.autograd_waits."""
    if not len(lane):
        return
    caller = piece_at(pid, pstart, plane, lane, gap_from)
    start_op = piece_at(pid, pstart, plane, engine, first)
    ok = (caller >= 0) & (start_op >= 0)
    parts.add_edges(caller[ok], start_op[ok], False, 0, ISSUE)
    last_op = piece_at(pid, pstart, plane, engine, cut - 1)
    resume = piece_at(pid, pstart, plane, lane, cut)
    ok = (last_op >= 0) & (resume >= 0)
    ok[ok] = pstart[resume[ok] - pid[0]] == cut[ok]  # a piece starts there (not past the thread's last op)
    parts.add_edges(last_op[ok], resume[ok], True, 0, SYNC)


def parts_start(parts: _Parts, ids: np.ndarray) -> np.ndarray:
    starts = np.concatenate([n["start"] for n in parts.nodes])
    return starts[ids]


def _device_nodes(parts, r, t, ts, end, dev_rows, worker_rows, step):
    """Nodes of device streams and gloo worker threads, one chain per (device, stream) or worker thread. A
    communication activity becomes two nodes: its arrival W (no duration) and its transfer T."""
    rows = np.concatenate([dev_rows, worker_rows])
    is_worker = np.concatenate([np.zeros(len(dev_rows), bool), np.ones(len(worker_rows), bool)])
    lane_key = np.where(is_worker, -1, t["device"][rows].astype(np.int64)) * (2**40) + t["stream"][rows]
    order = np.lexsort((ts[rows], lane_key))
    rows, is_worker, lane_key = rows[order], is_worker[order], lane_key[order]
    lanes, lane_of = np.unique(lane_key, return_inverse=True)
    n = len(rows)
    is_comm = t["kind"][rows] == EventKind.COMM
    # W then T for comm: expand
    reps = np.where(is_comm, 2, 1)
    total = int(reps.sum())
    owner = np.repeat(np.arange(n), reps)
    second = np.zeros(total, bool)
    second[np.cumsum(reps)[is_comm] - 1] = True
    first_of = np.cumsum(reps) - reps
    kinds = np.where(t["kind"][rows] == EventKind.KERNEL, COMPUTE, np.where(is_comm, TRANSFER, MEMCPY)).astype(np.int8)
    kk = kinds[owner].copy()
    kk[is_comm[owner] & ~second] = WAIT
    start = ts[rows][owner].copy()
    dur = (end - ts)[rows][owner].copy()
    dur[is_comm[owner] & ~second] = 0
    c0 = parts.add_chains(DEVICE_CHAIN, r, lanes % (2**40))
    for i in np.flatnonzero(np.bincount(lane_of, weights=is_worker, minlength=len(lanes)) > 0):
        parts.chain_info[c0 + i] = (WORKER_CHAIN, r, int(lanes[i] % (2**40)))
    ids = parts.add_nodes(
        chain=c0 + lane_of[owner],
        start=start,
        dur=dur,
        kind=kk,
        rank=np.full(total, r),
        row=rows[owner],
        dimension=np.full(total, "", object),
        step=np.asarray(step)[rows][owner].astype(np.int64),
    )
    node_main = ids[first_of]  # W for comm, the node itself otherwise
    w_ids = np.where(is_comm, node_main, -1)
    t_ids = np.where(is_comm, node_main + 1, -1)
    d_ids = node_main
    # keep (rows, ids) sorted by id for lookups
    return d_ids, w_ids, t_ids, rows


def _end_node(d_ids, t_ids):
    return np.where(t_ids >= 0, t_ids, d_ids)


def _cross_rank(parts: _Parts, comm, comm_nodes, traces: TraceSet) -> None:
    """A collective cannot finish before its last peer arrives: a barrier node per matched instance, entered
    from every peer's arrival, leaving to every peer's transfer."""
    inst = comm.instances
    if not len(inst) or "match_id" not in inst.columns:
        return
    rank_col, match = inst["rank"], inst["match_id"]
    w_of = np.full(len(inst), -1, np.int64)
    t_of = np.full(len(inst), -1, np.int64)
    for r, (rows, w, tt) in comm_nodes.items():
        sel = np.flatnonzero(rank_col == r)
        t = traces.table(r)
        comm_rows = np.flatnonzero(t.mask_kind(EventKind.COMM))
        if len(sel) != len(comm_rows):
            continue
        # a rank's instances are its COMM rows in (stable) start order (tracekit.analyzers.comm.instances)
        inst_rows = comm_rows[np.argsort(t["ts_ns"][comm_rows], kind="stable")]
        w_of[sel], t_of[sel] = lookup(rows, w, inst_rows), lookup(rows, tt, inst_rows)
        known = t_of[sel] >= 0
        _set_dimension(parts, t_of[sel][known], inst["dimension"][sel][known])
    ok = (match >= 0) & (w_of >= 0)
    if not ok.any():
        return
    mids, m_of = np.unique(match[ok], return_inverse=True)
    k = len(mids)
    w_start = parts_start(parts, w_of[ok])
    arrive = np.full(k, NEG, np.int64)
    np.maximum.at(arrive, m_of, w_start)
    c0 = parts.add_chains(BARRIER_CHAIN, -1, np.arange(k))
    bar = parts.add_nodes(
        chain=c0 + np.arange(k),
        start=arrive,
        dur=np.zeros(k, np.int64),
        kind=np.full(k, WAIT, np.int8),
        rank=np.full(k, -1),
        row=np.full(k, -1),
        dimension=np.full(k, "", object),
        step=np.full(k, -1, np.int64),
    )
    parts.add_edges(w_of[ok], bar[m_of], False, 0, ARRIVE)
    parts.add_edges(bar[m_of], t_of[ok], False, 0, RELEASE)


def _set_dimension(parts: _Parts, ids: np.ndarray, dims: np.ndarray) -> None:
    parts.dims.append((ids, dims))


def _assemble(parts: _Parts, rank_windows, base, shifts, notes) -> Graph:
    cols = {k: np.concatenate([n[k] for n in parts.nodes]) for k in parts.nodes[0]} if parts.nodes else None
    if cols is None:
        raise EmptyWindowError("critical path: no events in the traces; was the profiler active?")
    for ids, dims in parts.dims:
        cols["dimension"][ids] = dims
    n = parts.n
    # transfer nodes start at the last arrival: W keeps the arrival, T = [max(arrival, last), end]
    e = {
        k: np.concatenate([x[k] for x in parts.edges]) if parts.edges else np.empty(0, np.int64)
        for k in ("src", "dst", "anchor_end", "delay", "etype", "rule")
    }
    if not parts.edges:
        e["anchor_end"] = e["anchor_end"].astype(bool)
        e["etype"], e["rule"] = e["etype"].astype(np.int8), e["rule"].astype(np.int8)
    start, dur = cols["start"].astype(np.int64), cols["dur"].astype(np.int64)
    rel = e["etype"] == RELEASE
    if rel.any():
        arrive = start[e["src"][rel]]
        t_node = e["dst"][rel]
        t_end = start[t_node] + dur[t_node]
        new_start = np.minimum(np.maximum(start[t_node], arrive), t_end)
        start[t_node] = new_start
        dur[t_node] = t_end - new_start
    order = np.argsort(cols["chain"], kind="stable")  # chains were added in order; nodes within by time
    inv = np.empty(n, np.int64)
    inv[order] = np.arange(n)
    chain = cols["chain"][order]
    start, dur = start[order], dur[order]
    src, dst = inv[e["src"]], inv[e["dst"]]
    info = np.array(parts.chain_info, np.int64).reshape(-1, 3)
    gap, delay, resid, fixed, bind = residuals(chain, start, dur, src, dst, e["anchor_end"], e["delay"])
    fixed[info[chain, 0] == BARRIER_CHAIN] = NEG  # a barrier is only where its last peer arrives
    rank = cols["rank"][order].astype(np.int64)
    wins = window_nodes(rank_windows, rank, start, dur, info[:, 0], chain, cols["step"][order])
    return Graph(
        chain,
        start,
        dur,
        gap,
        fixed,
        cols["kind"][order].astype(np.int8),
        rank,
        cols["row"][order].astype(np.int64),
        cols["dimension"][order],
        info[:, 0],
        info[:, 1],
        info[:, 2],
        src,
        dst,
        e["anchor_end"],
        delay,
        e["etype"],
        resid,
        e["rule"],
        bind,
        wins,
        base,
        shifts,
        tuple(notes),
    )
