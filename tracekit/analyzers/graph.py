"""A dependency graph over all ranks: chains of nodes (host threads, device streams, gloo worker threads)
plus edges between chains (launch, host synchronisation, stream waits, gloo issue/wait, cross-rank arrival).

Node times are measured, on the reference rank's clock (the clock offsets of tracekit.analyzers.clocks are
subtracted), in ns relative to ``base_ns``. Replaying the graph (tracekit.analyzers.whatif) computes, in chain
order, ``start[j] = max(start[j-1] + dur[j-1] + gap[j], fixed[j], max over edges e into j of
(start[src] + anchor_end * dur[src] + delay[e]))``. Every edge delay and gap is measured: the edge that bound
a node in the trace carries the residual (a launch latency, a sync's return, a kernel-to-kernel gap), the
others their natural minimum clipped so that none exceeds the measured start, so replaying the unchanged
graph reproduces every measured start exactly.

Host threads are cut into *pieces*: the time between consecutive boundaries of the thread's ops, each
attributed to its innermost op (the leaf that matters) or to nobody (a gap: host time too, where a data
loader, a Python stall or an injected delay shows up). A host synchronisation is cut where the device work it
waited for ended; the pieces before that cut are waiting (no own duration), the piece after it starts when the
device work ends (plus the measured return latency).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import EmptyWindowError
from ..model.events import EventKind, EventTable
from ..model.traceset import TraceSet

# node kinds, as on the critical path
KINDS = ("compute", "comm_transfer", "comm_wait", "host", "memcpy", "idle")
COMPUTE, TRANSFER, WAIT, HOST, MEMCPY, IDLE = range(6)
# chain types
HOST_CHAIN, DEVICE_CHAIN, WORKER_CHAIN, BARRIER_CHAIN = range(4)
# edge types (their residual delay's kind on the path in EDGE_KIND)
LAUNCH, SYNC, STREAM_WAIT, ISSUE, GLOO_WAIT, ARRIVE, RELEASE = range(7)
EDGE_KIND = (HOST, HOST, IDLE, HOST, HOST, WAIT, WAIT)
CHAIN_GAP_KIND = (HOST, IDLE, IDLE, WAIT)

HOST_SYNC_CALLS = re.compile(r"^(cuda|hip)(Stream|Device|Event|Ctx)Synchroni[sz]e")
# calls that block when the device is behind: a full launch queue, a copy from/to pageable memory
BLOCKING_CALLS = re.compile(r"^(cuda|hip)(LaunchKernel|LaunchKernelExC|MemcpyAsync|Memcpy|MemsetAsync)$")
BLOCKED_NS = 50_000  # a blocking call this long, with device work ending inside it, waited for the device
_HOST_KINDS = (EventKind.CPU_OP, EventKind.CPU_COMM_OP, EventKind.ANNOTATION, EventKind.RUNTIME, EventKind.STEP,
               EventKind.SYNC, EventKind.OTHER)
_DEVICE_NODE_KINDS = (EventKind.KERNEL, EventKind.COMM, EventKind.MEMCPY, EventKind.MEMSET)
NEG = -(2**60)


@dataclass(frozen=True, slots=True)
class Window:
    """One step window on one rank: the host pieces where it starts and ends."""

    step: int
    rank: int
    start_node: int
    end_node: int
    start_ns: int  # measured, aligned, relative to base_ns
    end_ns: int


@dataclass(frozen=True, slots=True)
class Graph:
    """Nodes sorted by (chain, order in the chain). ``row`` is the node's event row in its rank's table (the
    innermost op of a host piece; -1 for a gap, a barrier or a collective's arrival marker)."""

    chain: np.ndarray  # int64, sorted
    start: np.ndarray  # int64 measured start
    dur: np.ndarray  # int64 own duration (what a replay scales)
    gap: np.ndarray  # int64 measured residual of the chain edge into the node (0 for a chain's first node)
    fixed: np.ndarray  # int64 earliest start from outside the graph (NEG for none)
    kind: np.ndarray  # int8, index into KINDS
    rank: np.ndarray  # int64
    row: np.ndarray  # int64
    dimension: np.ndarray  # object: a collective transfer's parallel dimension, "" elsewhere
    chain_type: np.ndarray  # per chain
    chain_rank: np.ndarray  # per chain
    chain_lane: np.ndarray  # per chain: thread or stream id
    src: np.ndarray  # edges
    dst: np.ndarray
    anchor_end: np.ndarray  # bool: the edge leaves the source's end (else its start)
    delay: np.ndarray  # int64
    etype: np.ndarray  # int8
    windows: tuple[Window, ...]
    base_ns: int
    shifts: dict[int, int]  # rank -> what was subtracted from its table's times (base + clock offset)
    notes: tuple[str, ...] = ()
    first: np.ndarray = field(init=False, repr=False, compare=False)  # chain-first flags

    def __post_init__(self) -> None:
        f = np.ones(len(self.chain), bool)
        f[1:] = self.chain[1:] != self.chain[:-1]
        object.__setattr__(self, "first", f)

    def __len__(self) -> int:
        return len(self.chain)

    @property
    def end(self) -> np.ndarray:
        return self.start + self.dur


class _Parts:
    """Nodes and edges collected rank by rank, before the residuals are computed."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, np.ndarray]] = []
        self.edges: list[dict[str, np.ndarray]] = []
        self.n = 0
        self.chains = 0
        self.chain_info: list[tuple[int, int, int]] = []  # (type, rank, lane)
        self.dims: list[tuple[np.ndarray, np.ndarray]] = []  # (transfer nodes, their dimension)

    def add_nodes(self, **cols: np.ndarray) -> np.ndarray:
        k = len(cols["start"])
        self.nodes.append(cols)
        ids = np.arange(self.n, self.n + k)
        self.n += k
        return ids

    def add_chains(self, ctype: int, rank: int, lanes: np.ndarray) -> int:
        first = self.chains
        self.chain_info += [(ctype, rank, int(x)) for x in lanes]
        self.chains += len(lanes)
        return first

    def add_edges(self, src, dst, anchor_end, natural, etype: int) -> None:
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        if not len(src):
            return
        self.edges.append({"src": src, "dst": dst, "anchor_end": np.broadcast_to(anchor_end, src.shape).astype(bool),
                           "delay": np.broadcast_to(natural, src.shape).astype(np.int64),
                           "etype": np.full(len(src), etype, np.int8)})


def build_graph(traces: TraceSet, windows: str | None = None, comm=None) -> Graph:
    """The graph of the whole trace set. ``windows``: None for ProfilerStep#N windows, or the name of an
    annotation whose instances (in time order, numbered from 0) are the windows. ``comm``: a CommResult
    (tracekit.analyzers.run) to reuse; computed when None."""
    from .run import CommAnalyzer

    comm = comm if comm is not None else CommAnalyzer().run(traces)
    offsets = {o.rank: int(round(o.offset_ns)) for o in comm.cross.offsets}
    base = min((int(t["ts_ns"].min()) - offsets.get(r, 0) for r, t in traces if len(t)), default=0)
    parts = _Parts()
    notes: list[str] = []
    comm_nodes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # rank -> (rows, W ids, T ids)
    rank_windows: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    shifts = {r: base + offsets.get(r, 0) for r in traces.ranks}
    for r, table in traces:
        shift = shifts[r]
        built = _rank(parts, r, table, traces.info(r).device_type, shift, windows, notes)
        comm_nodes[r] = built[0]
        rank_windows.append((r, *built[1]))
    _cross_rank(parts, comm, comm_nodes, traces)
    g = _assemble(parts, rank_windows, base, shifts, notes)
    for note in notes:
        warnings.warn(note, stacklevel=2)
    return g


def _rank(parts: _Parts, r: int, t: EventTable, device_type: str, shift: int, windows: str | None,
          notes: list[str]):
    ts, end, kind, dev, lane = t["ts_ns"] - shift, t.end_ns - shift, t["kind"], t["device"], t["stream"]
    dev_rows = np.flatnonzero(t.mask_kind(*_DEVICE_NODE_KINDS) & (dev >= 0))
    worker_rows = np.flatnonzero(t.mask_kind(EventKind.COMM) & (dev < 0))
    workers = np.unique(lane[worker_rows])
    host_rows = np.flatnonzero(t.mask_kind(*_HOST_KINDS) & (dev < 0) & ~np.isin(lane, workers) & (t["dur_ns"] > 0))
    # device streams and gloo worker threads: one node per activity (a collective: arrival W + transfer T)
    d_ids, w_ids, t_ids, d_rows = _device_nodes(parts, r, t, ts, end, dev_rows, worker_rows)
    syncs, more_syncs = _host_syncs(t, ts, end, host_rows, d_rows, _end_node(d_ids, t_ids))
    gloo_waits, idle_gloo = _gloo_waits(t, ts, end, host_rows, d_rows, t_ids)
    cuts = np.concatenate([syncs[1], gloo_waits[1]])
    cut_lane = np.concatenate([syncs[2], gloo_waits[2]])
    call_rows = np.concatenate([syncs[3], gloo_waits[3]])
    pid, pstart, plane = _pieces(parts, r, t, ts, end, host_rows, cuts, cut_lane, call_rows, device_type)
    # launches: runtime call (host piece at its start) -> device activity with the same correlation
    corr = t["correlation"]
    launch_rows = host_rows[kind[host_rows] == EventKind.RUNTIME]
    lr = launch_rows[corr[launch_rows] >= 0]
    d_corr = corr[d_rows]
    order = np.argsort(corr[lr], kind="stable")
    pos = np.searchsorted(corr[lr][order], d_corr)
    ok = (pos < len(lr)) & (d_corr >= 0)
    pos = np.minimum(pos, max(len(lr) - 1, 0))
    ok &= corr[lr][order][pos] == d_corr if len(lr) else np.zeros(len(d_rows), bool)
    src_row = lr[order][pos[ok]]
    src_piece = _piece_at(pid, pstart, plane, lane[src_row], ts[src_row])
    dst_node = d_ids[ok]
    lat = ts[d_rows[ok]] - ts[src_row]  # a collective's launch leads to its arrival W, which starts with it
    natural = np.full(len(lat), int(np.min(lat[lat > 0])) if (lat > 0).any() else 0)
    keep = src_piece >= 0
    parts.add_edges(src_piece[keep], dst_node[keep], False, natural[keep], LAUNCH)
    if len(dev_rows) and not len(lr):
        notes.append(f"rank {r}: no launch correlations between host and device; device activities have no "
                     "launch edges")
    # host waits for the device: device end -> the piece that starts where the wait was cut
    zero = np.zeros(1, np.int64)
    waits = ((syncs[:3], zero, SYNC), (gloo_waits[:3], zero, GLOO_WAIT), (more_syncs[:3], more_syncs[3], SYNC),
             (idle_gloo[:3], zero, GLOO_WAIT))
    for (dep_node, cut, cl), natural, etype in waits:
        if len(cut):
            dst = _piece_at(pid, pstart, plane, cl, cut)
            ok = dst >= 0
            ok[ok] = pstart[dst[ok] - pid[0]] == cut[ok]  # a piece starts there (not past the thread's last op)
            parts.add_edges(dep_node[ok], dst[ok], True, np.broadcast_to(natural, cut.shape)[ok], etype)
    _stream_waits(parts, t, ts, end, d_rows, d_ids, _end_node(d_ids, t_ids))
    _gloo_issues(parts, t, host_rows, worker_rows, d_rows, d_ids, w_ids, pid, pstart, plane, ts)
    win = _windows(t, ts, end, windows, pid, pstart, plane)
    if windows is None and not len(win[0]) and len(pid):
        win = _whole_trace_window(pid, pstart, plane, parts)
    comm_rows = d_rows[t_ids >= 0]
    return (comm_rows, w_ids[t_ids >= 0], t_ids[t_ids >= 0]), win


def parts_start(parts: _Parts, ids: np.ndarray) -> np.ndarray:
    starts = np.concatenate([n["start"] for n in parts.nodes])
    return starts[ids]


def _device_nodes(parts, r, t, ts, end, dev_rows, worker_rows):
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
    kinds = np.where(t["kind"][rows] == EventKind.KERNEL, COMPUTE,
                     np.where(is_comm, TRANSFER, MEMCPY)).astype(np.int8)
    kk = kinds[owner].copy()
    kk[is_comm[owner] & ~second] = WAIT
    start = ts[rows][owner].copy()
    dur = (end - ts)[rows][owner].copy()
    dur[is_comm[owner] & ~second] = 0
    c0 = parts.add_chains(DEVICE_CHAIN, r, lanes % (2**40))
    for i in np.flatnonzero(np.bincount(lane_of, weights=is_worker, minlength=len(lanes)) > 0):
        parts.chain_info[c0 + i] = (WORKER_CHAIN, r, int(lanes[i] % (2**40)))
    ids = parts.add_nodes(chain=c0 + lane_of[owner], start=start, dur=dur, kind=kk, rank=np.full(total, r),
                          row=rows[owner],
                          dimension=np.full(total, "", object))
    node_main = ids[first_of]  # W for comm, the node itself otherwise
    w_ids = np.where(is_comm, node_main, -1)
    t_ids = np.where(is_comm, node_main + 1, -1)
    d_ids = node_main
    # keep (rows, ids) sorted by id for lookups
    return d_ids, w_ids, t_ids, rows


def _end_node(d_ids, t_ids):
    return np.where(t_ids >= 0, t_ids, d_ids)


def _host_syncs(t, ts, end, host_rows, d_rows, d_end_ids):
    """(device node waited for, cut time, thread, call row) of each host synchronisation that waited: the latest
    device activity (of the synchronised stream when the trace names it) that ended inside the call. The table
    carries no cudaEventRecord ids, so an event sync waits for the latest activity of any stream (by time). A
    launch or copy call of BLOCKED_NS or more during which device work ended waited for that work (a full launch
    queue, a pageable copy)."""
    names = np.array([bool(HOST_SYNC_CALLS.match(s)) for s in t.strings] + [False], bool)
    blocking = np.array([bool(BLOCKING_CALLS.match(s)) for s in t.strings] + [False], bool)
    nid = t["name_id"][host_rows]
    code = np.where(nid < 0, len(t.strings), nid)
    runtime = t["kind"][host_rows] == EventKind.RUNTIME
    long_call = blocking[code] & (end[host_rows] - ts[host_rows] >= BLOCKED_NS)
    sync_rows = host_rows[(names[code] | long_call) & runtime]
    is_long = ~names[np.where(t["name_id"][sync_rows] < 0, len(t.strings), t["name_id"][sync_rows])]
    empty = (np.empty(0, np.int64),) * 4
    if not len(sync_rows) or not len(d_rows):
        return empty, empty
    # the device-side cuda_sync record of the call names the stream of a stream sync (-1: any stream)
    dsync = np.flatnonzero(t.mask_kind(EventKind.SYNC) & (t["device"] >= 0))
    dstream = pd.Series(t["stream"][dsync], index=t["correlation"][dsync])
    dstream = dstream[~dstream.index.duplicated()]
    stream = dstream.reindex(t["correlation"][sync_rows]).fillna(-1).to_numpy(np.int64)
    d_end = end[d_rows]
    dep = _latest_before(d_end, t["stream"][d_rows], end[sync_rows], stream)
    dep_end = np.where(dep >= 0, d_end[np.maximum(dep, 0)], NEG)
    waited = (dep >= 0) & (dep_end > ts[sync_rows])
    if is_long.any():  # a long launch/copy waited for earlier work (or, a copy, for its own transfer)
        corr = t["correlation"]
        rt_rows = host_rows[runtime & (corr[host_rows] >= 0)]
        launched = pd.Series(ts[rt_rows], index=corr[rt_rows])
        launched = launched[~launched.index.duplicated()]
        drow = d_rows[np.maximum(dep, 0)]
        at = launched.reindex(corr[drow]).to_numpy(np.float64)
        before = np.nan_to_num(at, nan=np.inf) < ts[sync_rows]
        own_copy = (corr[drow] == corr[sync_rows]) & np.isin(t["kind"][drow], [EventKind.MEMCPY, EventKind.MEMSET])
        returned = end[sync_rows] - dep_end <= BLOCKED_NS
        waited &= ~is_long | ((before | own_copy) & returned)
    # a stream or device sync that found the device done still orders after it (it would wait if the device
    # were slower): an edge into the piece after the call, its natural delay the call's own duration
    calls = np.array([bool(re.match(r"^(cuda|hip)(Stream|Device|Ctx)Synchroni[sz]e", x)) for x in t.strings] + [False])
    idle = (dep >= 0) & ~waited & ~is_long & calls[np.where(t["name_id"][sync_rows] < 0, len(t.strings),
                                                             t["name_id"][sync_rows])]
    lane, dur = t["stream"][sync_rows], (end - ts)[sync_rows]
    to, at, ln, nat = [d_end_ids[dep[idle]]], [end[sync_rows][idle]], [lane[idle]], [dur[idle]]
    # a device sync waits for every stream: the latest activity of each other stream is an input too
    device_wide = (stream < 0) & ~is_long & calls[np.where(t["name_id"][sync_rows] < 0, len(t.strings),
                                                            t["name_id"][sync_rows])]
    for st in np.unique(t["stream"][d_rows]).tolist():
        dep_s = _latest_before(d_end, t["stream"][d_rows], end[sync_rows], np.full(len(sync_rows), st))
        other = device_wide & (dep_s >= 0) & (dep_s != dep) & (waited | idle)
        to.append(d_end_ids[dep_s[other]])
        at.append(np.where(waited, dep_end, end[sync_rows])[other])
        ln.append(lane[other])
        nat.append(np.where(waited, 0, dur)[other])
    extra = tuple(np.concatenate(x) for x in (to, at, ln, nat))
    return (d_end_ids[dep[waited]], dep_end[waited], lane[waited], sync_rows[waited]), extra


def _latest_before(values, groups, limits, want_group):
    """Index of the largest ``values`` <= limit, among rows of ``want_group`` (or of any group where -1). One
    sort of (group, value) keys and one search for all the queries."""
    out = np.full(len(limits), -1, np.int64)
    if not len(values):
        return out
    anyg = want_group < 0
    if anyg.any():
        order = np.argsort(values, kind="stable")
        pos = np.searchsorted(values[order], limits[anyg], side="right") - 1
        out[anyg] = np.where(pos >= 0, order[np.maximum(pos, 0)], -1)
    if (~anyg).any():
        ug, gcode = np.unique(groups, return_inverse=True)
        lo = int(min(values.min(), limits.min()))
        B = np.int64(2**42)
        order = np.lexsort((values, gcode))
        keys = (gcode * B + (values - lo))[order]
        q = want_group[~anyg]
        qc = np.searchsorted(ug, q)
        known = (qc < len(ug)) & (ug[np.minimum(qc, len(ug) - 1)] == q)
        pos = np.searchsorted(keys, qc * B + (limits[~anyg] - lo), side="right") - 1
        hit = known & (pos >= 0) & (gcode[order[np.maximum(pos, 0)]] == qc)
        out[~anyg] = np.where(hit, order[np.maximum(pos, 0)], -1)
    return out


def _gloo_waits(t, ts, end, host_rows, d_rows, t_ids):
    """((worker-span transfer node, cut, thread, wait row) of each tracekit wait annotation (a host SYNC carrying a
    process group and Seq) whose gloo span ended after it began (cut where the span ended, or at the wait's end
    if the span's record closes later), and (span, wait end, thread, 0) of those whose span had ended before:
    they would wait for a slower span)."""
    empty = (np.empty(0, np.int64),) * 4
    waits = host_rows[(t["kind"][host_rows] == EventKind.SYNC) & (t["seq"][host_rows] >= 0)]
    spans = d_rows[(t_ids >= 0) & (t["device"][d_rows] < 0) & (t["seq"][d_rows] >= 0)]
    if not len(waits) or not len(spans):
        return empty, empty
    t_of_span = _lookup(d_rows, t_ids, spans)
    key = pd.Series(np.arange(len(spans)), index=pd.MultiIndex.from_arrays([t["pg_name_id"][spans], t["seq"][spans]]))
    key = key[~key.index.duplicated()]
    hit = key.reindex(pd.MultiIndex.from_arrays([t["pg_name_id"][waits], t["seq"][waits]])).to_numpy()
    ok = ~np.isnan(hit)
    j = hit[ok].astype(np.int64)
    w = waits[ok]
    span_end = end[spans[j]]
    inside = span_end > ts[w]
    node, lane = t_of_span[j], t["stream"][w]
    idle = (node[~inside], end[w][~inside], lane[~inside], np.zeros(int((~inside).sum()), np.int64))
    return (node[inside], np.minimum(span_end, end[w])[inside], lane[inside], w[inside]), idle


def _lookup(keys, values, wanted):
    s = pd.Series(values, index=keys)
    return s.reindex(wanted).fillna(-1).to_numpy(np.int64)


def _gloo_issues(parts, t, host_rows, worker_rows, d_rows, d_ids, w_ids, pid, pstart, plane, ts):
    """The caller's issue (a host op carrying the span's process group and Seq) -> the worker span."""
    if not len(worker_rows):
        return
    spans = worker_rows[t["seq"][worker_rows] >= 0]
    issues = host_rows[(t["seq"][host_rows] >= 0) & (t["kind"][host_rows] != EventKind.SYNC)]
    if not len(spans) or not len(issues):
        return
    key_i = pd.Series(issues, index=pd.MultiIndex.from_arrays([t["pg_name_id"][issues], t["seq"][issues]]))
    key_i = key_i[~key_i.index.duplicated()]
    hit = key_i.reindex(pd.MultiIndex.from_arrays([t["pg_name_id"][spans], t["seq"][spans]])).to_numpy()
    ok = ~np.isnan(hit)
    irow = hit[ok].astype(np.int64)
    src = _piece_at(pid, pstart, plane, t["stream"][irow], ts[irow])
    dst = _lookup(d_rows, w_ids, spans[ok])
    keep = (src >= 0) & (dst >= 0)
    parts.add_edges(src[keep], dst[keep], False, 0, ISSUE)


def _stream_waits(parts, t, ts, end, d_rows, d_ids, d_end_ids):
    """cudaStreamWaitEvent: the first activity after a device-side wait on a stream waits for the latest
    activity of another stream of the device that ended before it started (by time: the table carries no
    event ids). Vectorised: one search per wait for the next activity of its stream, then a few steps back
    through the device's activities sorted by end to skip those of the waiting stream itself."""
    sw = np.flatnonzero(t.mask_kind(EventKind.SYNC) & (t["device"] >= 0) & (t["stream"] >= 0))
    if not len(sw) or not len(d_rows):
        return
    waits = np.array(["wait" in s.lower() for s in t.strings] + [False], bool)
    nid = t["name_id"][sw]
    sw = sw[waits[np.where(nid < 0, len(t.strings), nid)]]
    if not len(sw):
        return
    dev, ds, dstart, dend = t["device"][d_rows].astype(np.int64), t["stream"][d_rows], ts[d_rows], end[d_rows]
    # the next activity on the waiting stream at or after the wait
    lane = dev * (2**40) + ds
    nxt = _first_after(lane, dstart, t["device"][sw].astype(np.int64) * (2**40) + t["stream"][sw], ts[sw])
    ok = nxt >= 0
    j, stream_j = nxt[ok], ds[nxt[ok]]
    # the latest end <= its start on the same device, stepping back past the waiting stream's own activities
    ug, gcode = np.unique(dev, return_inverse=True)
    order = np.lexsort((dend, gcode))
    lo = int(min(dend.min(), dstart.min()))
    B = np.int64(2**42)
    keys = (gcode * B + (dend - lo))[order]
    pos = np.searchsorted(keys, gcode[j] * B + (dstart[j] - lo), side="right") - 1
    src = np.full(len(j), -1, np.int64)
    for _ in range(8):  # a bounded walk back, vectorised over all waits
        valid = (pos >= 0) & (src < 0)
        cand = order[np.maximum(pos, 0)]
        same_dev = gcode[cand] == gcode[j]
        take = valid & same_dev & (ds[cand] != stream_j)
        src[take] = cand[take]
        pos = np.where(valid & same_dev & ~take, pos - 1, -1)
    keep = src >= 0
    parts.add_edges(d_end_ids[src[keep]], d_ids[j[keep]], True, 0, STREAM_WAIT)


def _first_after(lanes, starts, q_lanes, q_times):
    """Index of the earliest ``starts`` >= q_time on lane q_lane (-1 where none)."""
    ul, code = np.unique(lanes, return_inverse=True)
    lo = int(min(starts.min(), q_times.min()))
    B = np.int64(2**42)
    order = np.lexsort((starts, code))
    keys = (code * B + (starts - lo))[order]
    qc = np.searchsorted(ul, q_lanes)
    known = (qc < len(ul)) & (ul[np.minimum(qc, len(ul) - 1)] == q_lanes)
    pos = np.searchsorted(keys, qc * B + (q_times - lo), side="left")
    inside = known & (pos < len(keys))
    hit = inside & (code[order[np.minimum(pos, len(keys) - 1)]] == qc)
    return np.where(hit, order[np.minimum(pos, len(keys) - 1)], -1)


def _pieces(parts, r, t, ts, end, host_rows, cuts, cut_lane, call_rows, device_type):
    """Cut every host thread at its ops' boundaries (and at ``cuts``); attribute each piece to its innermost op.
    Returns (piece ids, piece starts, piece threads), sorted by (thread, start)."""
    lanes_all = t["stream"][host_rows]
    lanes, lcode = np.unique(lanes_all, return_inverse=True)
    if not len(host_rows):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    s, e = ts[host_rows], end[host_rows]
    lo = int(min(s.min(), cuts.min() if len(cuts) else s.min()))
    B = np.int64(2**42)
    rel_s, rel_e = s - lo, e - lo
    cut_code = np.searchsorted(lanes, cut_lane)
    okc = (cut_code < len(lanes)) & (lanes[np.minimum(cut_code, len(lanes) - 1)] == cut_lane) if len(cuts) else \
        np.zeros(0, bool)
    bkeys = np.unique(np.concatenate([lcode * B + rel_s, lcode * B + rel_e, cut_code[okc] * B + (cuts[okc] - lo)]))
    blane, btime = bkeys // B, bkeys % B
    nxt = np.flatnonzero(blane[1:] == blane[:-1])
    p_lane, p_s, p_e = blane[nxt], btime[nxt], btime[nxt + 1]
    # depth and innermost op: events sorted by (thread, start, -end)
    order = np.lexsort((-rel_e, rel_s, lcode))
    skeys = (lcode * B + rel_s)[order]
    ekeys = np.sort(lcode * B + rel_e)
    pk = p_lane * B + p_s
    depth = np.searchsorted(skeys, pk, side="right") - np.searchsorted(ekeys, pk, side="right")
    pos = np.empty(len(order), np.int64)
    pos[order] = np.arange(len(order))
    level = pos + 1 - np.searchsorted(ekeys, lcode * B + rel_s, side="right")
    L = np.int64(2**20)
    lkeys = (lcode * L + np.minimum(level, L - 1)) * B + rel_s
    lorder = np.argsort(lkeys, kind="stable")
    q = (p_lane * L + np.minimum(depth, L - 1)) * B + p_s
    at = np.searchsorted(lkeys[lorder], q, side="right") - 1
    inner = np.where((depth > 0) & (at >= 0), host_rows[lorder[np.maximum(at, 0)]], -1)
    # keep pieces inside the thread's span only (consecutive boundaries always are)
    kind = _piece_kind(t, inner, device_type)
    dur = p_e - p_s
    # waiting pieces: inside a host sync, before the cut
    dur = np.where(_waiting(inner, p_s + lo, call_rows, cuts), 0, dur)
    c0 = parts.add_chains(HOST_CHAIN, r, lanes)
    ids = parts.add_nodes(chain=c0 + p_lane, start=p_s + lo, dur=dur, kind=kind, rank=np.full(len(p_s), r),
                          row=inner, dimension=np.full(len(p_s), "", object))
    return ids, p_s + lo, lanes[p_lane]


def _waiting(inner, p_start, call_rows, cuts):
    """Pieces of a synchronising call that lie before the time its device work ended."""
    if not len(call_rows):
        return np.zeros(len(inner), bool)
    s = pd.Series(cuts, index=call_rows)
    s = s[~s.index.duplicated()]
    c = s.reindex(inner).to_numpy(np.float64)
    return np.nan_to_num(c, nan=-np.inf) > p_start


def _piece_kind(t, inner, device_type):
    k = np.full(len(inner), HOST, np.int8)
    if device_type == "cpu":
        ik = t["kind"][np.maximum(inner, 0)]
        k[(inner >= 0) & (ik == EventKind.CPU_OP)] = COMPUTE
    return k


def _piece_at(pid, pstart, plane, lanes, times):
    """The piece of thread ``lanes`` that contains ``times`` (-1 where none)."""
    if not len(pid):
        return np.full(len(times), -1, np.int64)
    ul, code = np.unique(plane, return_inverse=True)
    B = np.int64(2**42)
    base = int(min(pstart.min(), np.min(times) if len(times) else 0))
    keys = code * B + (pstart - base)
    lc = np.searchsorted(ul, lanes)
    okl = (lc < len(ul)) & (ul[np.minimum(lc, len(ul) - 1)] == lanes)
    q = lc * B + (np.asarray(times) - base)
    pos = np.searchsorted(keys, q, side="right") - 1
    ok = okl & (pos >= 0) & (code[np.maximum(pos, 0)] == lc)
    return np.where(ok, pid[np.maximum(pos, 0)], -1)


def _windows(t, ts, end, windows, pid, pstart, plane):
    if windows is None:
        m = t.mask_kind(EventKind.STEP)
        ids = t["step"][m].astype(np.int64)
    else:
        sid = t.string_id(windows)
        m = (t["name_id"] == sid) & (t["device"] < 0) if sid >= 0 else np.zeros(len(t), bool)
        ids = np.argsort(np.argsort(ts[m], kind="stable"), kind="stable").astype(np.int64)
    rows = np.flatnonzero(m)
    _, first = np.unique(ids, return_index=True)
    rows, ids = rows[first], ids[first]
    lanes = t["stream"][rows]
    s_node = _piece_at(pid, pstart, plane, lanes, ts[rows])
    e_node = _piece_at(pid, pstart, plane, lanes, end[rows] - 1)
    ok = (s_node >= 0) & (e_node >= 0)
    return ids[ok], s_node[ok], e_node[ok], ts[rows][ok], end[rows][ok]


def _whole_trace_window(pid, pstart, plane, parts: _Parts):
    """No ProfilerStep: one window (step -1) over the busiest host thread, from its first to its last op."""
    lanes, counts = np.unique(plane, return_counts=True)
    on = np.flatnonzero(plane == lanes[np.argmax(counts)])
    a, b = pid[on[0]], pid[on[-1]]
    end = int(pstart[on[-1]] + np.concatenate([n["dur"] for n in parts.nodes])[b])
    one = np.ones(1, np.int64)
    return -one, one * a, one * b, one * int(pstart[on[0]]), one * end


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
        # a rank's instances are its COMM rows in (stable) start order (tracekit.analyzers.instances)
        inst_rows = comm_rows[np.argsort(t["ts_ns"][comm_rows], kind="stable")]
        w_of[sel], t_of[sel] = _lookup(rows, w, inst_rows), _lookup(rows, tt, inst_rows)
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
    bar = parts.add_nodes(chain=c0 + np.arange(k), start=arrive, dur=np.zeros(k, np.int64),
                          kind=np.full(k, WAIT, np.int8), rank=np.full(k, -1), row=np.full(k, -1),
                          dimension=np.full(k, "", object))
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
    e = {k: np.concatenate([x[k] for x in parts.edges]) if parts.edges else np.empty(0, np.int64)
         for k in ("src", "dst", "anchor_end", "delay", "etype")}
    if not parts.edges:
        e["anchor_end"], e["etype"] = e["anchor_end"].astype(bool), e["etype"].astype(np.int8)
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
    gap, delay, fixed = _residuals(chain, start, dur, src, dst, e["anchor_end"], e["delay"])
    fixed[info[chain, 0] == BARRIER_CHAIN] = NEG  # a barrier is only where its last peer arrives
    wins = tuple(Window(int(s), r, int(inv[a]), int(inv[b]), int(ms), int(me))
                 for r, ids, sn, en, ws, we in rank_windows for s, a, b, ms, me in zip(ids, sn, en, ws, we))
    return Graph(chain, start, dur, gap, fixed, cols["kind"][order].astype(np.int8), cols["rank"][order].astype(np.int64),
                 cols["row"][order].astype(np.int64), cols["dimension"][order], info[:, 0], info[:, 1], info[:, 2],
                 src, dst, e["anchor_end"], delay, e["etype"], wins, base, shifts, tuple(notes))


def _residuals(chain, start, dur, src, dst, anchor_end, natural):
    """Measured gaps and delays: the binding input of each node (the largest natural candidate; the chain edge
    on ties) gets the residual up to the node's measured start; the others keep their natural delay clipped to
    it. A chain's first node without any input has a fixed start (its measured one)."""
    n = len(chain)
    first = np.ones(n, bool)
    first[1:] = chain[1:] != chain[:-1]
    prev_end = np.empty(n, np.int64)
    prev_end[1:] = start[:-1] + dur[:-1]
    chain_cand = np.where(first, NEG, prev_end)
    anchor = start[src] + np.where(anchor_end, dur[src], 0)
    cand = anchor + natural
    best = np.full(n, NEG, np.int64)
    np.maximum.at(best, dst, cand)
    edge_binds = (cand >= best[dst]) & (cand > chain_cand[dst])
    # one binding edge per node: the first of the maximal ones
    eb = np.flatnonzero(edge_binds)
    _, firsts = np.unique(dst[eb], return_index=True)
    bind = np.zeros(len(src), bool)
    bind[eb[firsts]] = True
    delay = np.where(bind, start[dst] - anchor, np.minimum(natural, start[dst] - anchor))
    has_edge_bind = np.zeros(n, bool)
    has_edge_bind[dst[bind]] = True
    gap = np.where(first, 0, np.where(has_edge_bind, np.minimum(0, start - chain_cand), start - chain_cand))
    has_input = np.zeros(n, bool)
    has_input[dst] = True
    fixed = np.where(first & ~has_input, start, NEG)  # where a chain starts unprompted (the trace's beginning)
    return gap.astype(np.int64), delay.astype(np.int64), fixed.astype(np.int64)
