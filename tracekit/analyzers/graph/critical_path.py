"""The critical path of each step: the longest dependency chain through the graph (tracekit.analyzers.graph.build)
from the step's start to its end, over all ranks, split by kind (compute, comm_transfer, comm_wait, host,
memcpy, idle) and by parallel dimension, with its segments and a one-line verdict (path_result.py).

The path is walked back from the latest window end of the step (where the step's device work ends: the
summary's ``wall_us``): at each node, the input that bound its start in the trace (evidence.py: the previous node
of its chain, an edge, or nothing) is followed; the gap after that input (a launch latency, a kernel-to-kernel
gap) is a segment of its own, *unexplained* when larger than the tolerance. The walk stops at the earliest window
start of the step, so the segments add up to the step's measured time. Crossing a collective's barrier to the
last rank to arrive is how the path changes rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import numpy as np
import pandas as pd

from ...model.traceset import TraceSet
from ...runtime.memory import gc_paused  # hundreds of thousands of segment tuples: no cycles to collect
from .. import intervals as iv
from .build import (
    ARRIVE,
    BARRIER_CHAIN,
    CHAIN_GAP_KIND,
    DEVICE_CHAIN,
    EDGE_KIND,
    HOST_CHAIN,
    IDLE,
    KINDS,
    LAUNCH,
    RELEASE,
    SYNC,
    TRANSFER,
    WAIT,
    Graph,
    build_graph,
)
from .host_edges import sorted_unique
from .path_result import CriticalPaths, Crossing, Segment, StepPath
from .structure import TOLERANCE_NS, WAIT_RULES
from .whatif import ReplayIndex, Spec, replay_window, scaled_durations

REBIND_ALL = 8  # under a what-if, a step of more than 1/REBIND_ALL of the graph's nodes is rebound whole
_EDGE_NAMES = {LAUNCH: "(launch latency)", SYNC: "(sync return)", ARRIVE: "(arrival)", RELEASE: "(last arrival)"}
__all__ = ["CriticalPaths", "Crossing", "Segment", "StepPath", "critical_paths"]


def critical_paths(
    traces: TraceSet, *, windows: str | None = None, graph: Graph | None = None, comm=None, specs: Sequence[str | Spec] = ()
) -> CriticalPaths:
    """The critical path of every step window (ProfilerStep#N, or the instances of the annotation
    ``windows``) over all ranks of ``traces``; with ``specs`` (what-if SPECs), the path of the replayed step."""
    g = graph if graph is not None else build_graph(traces, windows, comm)
    names = _Names(g, traces)
    steps: dict[int, list] = {}
    for w in g.windows:
        steps.setdefault(w.step, []).append(w)
    if not specs:
        b = _Binding(g, g.start, g.dur, g.bind)
        return CriticalPaths(tuple(_walk(g, b, names, s, ws) for s, ws in sorted(steps.items())), g.notes)
    dur, notes = scaled_durations(g, traces, [x if isinstance(x, Spec) else Spec.parse(x) for x in specs])
    out = []
    index = ReplayIndex(g)
    measured = _Binding(g, g.start, g.dur, g.bind)
    start, d, bind = g.start.copy(), g.dur.copy(), measured.bind.copy()  # the measured graph, a step replayed in it
    for step, ws in sorted(steps.items()):
        lo, hi = min(w.start_ns for w in ws), max(w.end_ns for w in ws)
        nodes, t, _ = replay_window(g, dur, lo, hi, index)
        start[nodes], d[nodes] = t, dur[nodes]
        if len(nodes) * REBIND_ALL > len(g):  # a step that is much of the graph: rebinding all of it is cheaper
            out.append(_walk(g, _Binding(g, start, d), names, step, ws))
            start[nodes], d[nodes] = g.start[nodes], g.dur[nodes]
            continue
        hit = _touched(g, index, nodes, lo, hi)
        bind[hit] = _bind_at(g, index, start, d, hit)
        out.append(_walk(g, _Binding(g, start, d, bind), names, step, ws))
        start[nodes], d[nodes], bind[hit] = g.start[nodes], g.dur[nodes], measured.bind[hit]
    return CriticalPaths(tuple(out), g.notes + tuple(notes))


def _touched(g: Graph, index: ReplayIndex, nodes: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The nodes whose binding input may change when ``nodes`` move: themselves, their chain successors and the
    destinations of their edges (a node's binding reads only its own start and its inputs' starts and ends)."""
    nxt = nodes[nodes + 1 < len(g)] + 1
    return sorted_unique(np.concatenate([nodes, nxt, g.dst[index.edges_from_window(lo, hi)]]))  # nodes: [lo, hi]


def _bind_at(g: Graph, index: ReplayIndex, start: np.ndarray, dur: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """_Binding's rule for ``nodes`` (sorted) only, with the same tie-breaks: among the edges that reach a node,
    the one whose source starts latest, then the highest edge id; the chain before any edge."""
    prev = np.maximum(nodes - 1, 0)
    chain_ok = ~g.first[nodes] & (start[prev] + dur[prev] + g.gap[nodes] >= start[nodes])
    e = np.sort(index.edges_into(nodes))
    val = start[g.src[e]] + np.where(g.anchor_end[e], dur[g.src[e]], 0) + g.delay[e]
    hits = e[val >= start[g.dst[e]]]
    edge = np.full(len(nodes), -1, np.int64)
    if len(hits):
        order = hits[np.lexsort((start[g.src[hits]], g.dst[hits]))]
        edge[np.searchsorted(nodes, g.dst[order])] = order  # last write per node wins: the latest source
    return np.where(chain_ok, -1, np.where(edge >= 0, edge, -2))


class _Binding:
    """For each node, which input bound its start (measured, or replayed): -1 chain, -2 fixed, else the edge."""

    def __init__(self, g: Graph, start: np.ndarray, dur: np.ndarray, bind: np.ndarray | None = None) -> None:
        self.g, self.start, self.dur = g, start, dur
        if bind is not None:
            self.bind = bind
            return
        n = len(g)
        prev_end = np.full(n, np.iinfo(np.int64).min // 2, np.int64)
        prev_end[1:] = start[:-1] + dur[:-1] + g.gap[1:]
        chain_ok = ~g.first & (prev_end >= start)
        val = start[g.src] + np.where(g.anchor_end, dur[g.src], 0) + g.delay
        reach = val >= start[g.dst]
        edge = np.full(n, -1, np.int64)
        hits = np.flatnonzero(reach)
        # prefer the edge whose source is latest in time (the one that really waited)
        if len(hits):
            order = hits[np.lexsort((start[g.src[hits]], g.dst[hits]))]
            edge[g.dst[order]] = order  # last write per node wins: the latest source
        self.bind = np.where(chain_ok, -1, np.where(edge >= 0, edge, -2))

    def device_first(self, j: int) -> bool:
        """Where a host piece and a device activity end together, the path starts at the device."""
        return bool(self.g.chain_type[self.g.chain[j]] != HOST_CHAIN)

    def run_first(self, j: int) -> int:
        """The first node of ``j``'s run of chain bindings (the walk goes down a run in one vectorised stretch),
        found by looking back in growing strides: a run's length, not the chain's. A chain's first node is
        never chain-bound, so the search stops inside ``j``'s chain."""
        hi, width = j + 1, 64
        while True:
            lo = max(hi - width, 0)
            nz = np.flatnonzero(self.bind[lo:hi] != -1)
            if len(nz):
                return lo + int(nz[-1])
            if lo == 0:
                return 0
            hi, width = lo, width * 4


# segment labels other than a node's own name (index into _LABELS; -1: the node's name)
_GAP, _BEFORE, _TAIL, _EDGE0 = 0, 1, 2, 3
_LABELS = ("(gap)", "(no recorded input)", "(after the last activity)") + tuple(
    _EDGE_NAMES.get(et, "(dependency)") for et in range(len(EDGE_KIND))
)
_LANE_WORDS = ("thread", "stream", "gloo thread", "")


class _Names:
    """Segment names, lanes and collective ops, looked up for many nodes at once (object arrays of str)."""

    def __init__(self, g: Graph, traces: TraceSet) -> None:
        self.g = g
        self.tables = dict(traces.tables)
        self._strings: dict[int, np.ndarray] = {}
        self._busy: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _decoded(self, r: int, column: str, rows: np.ndarray) -> np.ndarray:
        """``t.string(t[column][row]) or ""`` for each row of rank r's table."""
        t = self.tables[r]
        lookup = self._strings.get(r)
        if lookup is None:
            lookup = self._strings[r] = np.array(list(t.strings) + [""], object)
        ids = t[column][rows]
        out = lookup[np.where(ids < 0, len(t.strings), ids)]
        return np.where(out == None, "", out)  # noqa: E711 (elementwise)

    def nodes(self, j: np.ndarray) -> np.ndarray:
        g = self.g
        row, rank = g.row[j], g.rank[j]
        ctype = g.chain_type[g.chain[j]]
        out = np.where(ctype == HOST_CHAIN, "(host gap)", "(gap)").astype(object)
        named = (row >= 0) & (ctype != BARRIER_CHAIN)
        for r in np.unique(rank[named]).tolist():
            on = named & (rank == r)
            text = self._decoded(r, "name_id", row[on])
            wait = g.kind[j[on]] == WAIT
            text[wait] = text[wait] + " (arrival)"
            out[on] = text
        out[ctype == BARRIER_CHAIN] = "(last arrival)"
        return out

    def ops(self, j: np.ndarray) -> np.ndarray:
        g = self.g
        row, rank = g.row[j], g.rank[j]
        out = np.full(len(j), "", object)
        for r in np.unique(rank[row >= 0]).tolist():
            if r in self.tables:
                on = (row >= 0) & (rank == r)
                out[on] = self._decoded(r, "coll_op_id", row[on])
        return out

    def device_busy(self, w) -> int:
        """The union of the measured device activity of window ``w``'s rank inside the window (ns)."""
        u = self._busy.get(w.rank)
        if u is None:
            g = self.g
            on = (g.rank == w.rank) & (g.chain_type[g.chain] == DEVICE_CHAIN) & (g.dur > 0)
            u = self._busy[w.rank] = iv.union(g.start[on], g.start[on] + g.dur[on])
        return int(iv.length_in_windows(u, np.array([w.start_ns]), np.array([w.end_ns]))[0])

    def node(self, j: int) -> str:
        return str(self.nodes(np.array([j]))[0])

    def lanes(self, j: np.ndarray) -> np.ndarray:
        g = self.g
        chains, inv = np.unique(g.chain[j], return_inverse=True)
        text = np.array(
            [
                f"{_LANE_WORDS[int(ct)]} {int(ln)}" if _LANE_WORDS[int(ct)] else ""
                for ct, ln in zip(g.chain_type[chains], g.chain_lane[chains])
            ]
            + [""],
            object,
        )
        return text[np.where(j < 0, len(chains), inv.reshape(-1))]


class _Segs:
    """Segments as they are found walking back (latest first), in numpy chunks: node (whose name, lane and
    dimension they carry; -1 for none), label (-1: the node's own name), rank, start, end, kind, unexplained."""

    def __init__(self) -> None:
        self.chunks: list[tuple[np.ndarray, ...]] = []

    def add(self, node, lane_node, label, rank, s, e, kind, unexplained=0) -> None:
        cols = (node, lane_node, label, rank, s, e, kind, unexplained)
        n = max(np.size(x) for x in cols)
        self.chunks.append(tuple(np.broadcast_to(np.asarray(x, np.int64), (n,)) for x in cols))

    def arrays(self) -> tuple[np.ndarray, ...]:
        if not self.chunks:
            return tuple(np.empty(0, np.int64) for _ in range(8))
        return tuple(np.concatenate(c)[::-1] for c in zip(*self.chunks))


def _walk(g: Graph, b: _Binding, names: _Names, step: int, wins) -> StepPath:
    """Walk back from the step's latest window end along the binding inputs. Runs of chain bindings (a thread's
    or stream's consecutive pieces) are taken in one vectorised stretch; only the edges between chains are
    followed one by one."""
    start, dur = b.start, b.dur
    start_t = min(w.start_ns for w in wins)
    ends = [(int(start[n] + dur[n]) + w.tail_ns, int(start[n] + dur[n]), n, w) for w in wins for n in w.end_nodes]
    _, cur, j, end_w = max(ends, key=lambda x: (x[0], x[1], b.device_first(x[2]), x[2]))
    segs = _Segs()
    crossings: list[Crossing] = []
    length = cur + end_w.tail_ns - start_t
    if end_w.tail_ns:  # the window ends after its last node (an event that is no node of the graph)
        segs.add(-1, j, _TAIL, end_w.rank, max(cur, start_t), cur + end_w.tail_ns, IDLE, 1)
    at_end = True
    came_from = -1
    guard = 4 * len(g) + 10
    while cur > start_t and guard > 0:
        if at_end or b.bind[j] == -1:
            j, at_end, cur, used = _run(g, b, segs, j, at_end, cur, start_t, guard)
            guard -= used
            continue
        guard -= 1
        k = int(b.bind[j])
        if k >= 0:
            src = int(g.src[k])
            anchor = int(start[src] + (dur[src] if g.anchor_end[k] else 0))
            if cur != anchor:  # negative only where the measurement contradicts causality (clocks, rounding)
                _edge_segments(g, segs, k, j, src, anchor, cur, start_t)
            if int(g.etype[k]) == RELEASE:
                came_from = j
            elif int(g.etype[k]) == ARRIVE and came_from >= 0:
                c = _crossing(g, names, came_from, src, start)
                if c is not None:
                    crossings.append(c)
            cur, j, at_end = anchor, src, bool(g.anchor_end[k])
        else:
            segs.add(-1, j, _BEFORE, int(g.rank[j]), start_t, cur, IDLE, 1)
            cur = start_t
    return _result(g, names, step, segs, crossings, length, wins, end_w)


def _edge_segments(g: Graph, segs: _Segs, k: int, j: int, src: int, anchor: int, cur: int, start_t: int) -> None:
    """The time from edge ``k``'s anchor to node ``j``'s start: its natural delay, then its residual, which is
    unexplained when larger than the tolerance (a segment of its own)."""
    et = int(g.etype[k])
    rank = int(g.rank[j]) if g.rank[j] >= 0 else int(g.rank[src])
    r = int(g.resid[k])
    cut = cur - r if r > TOLERANCE_NS and anchor < cur - r < cur else cur
    if cut < cur:
        segs.add(-1, -1, _EDGE0 + et, rank, max(cut, start_t), cur, EDGE_KIND[et], 1)
    if cut != anchor:
        segs.add(-1, -1, _EDGE0 + et, rank, max(anchor, start_t) if cut > anchor else anchor, cut, EDGE_KIND[et])


def _run(g: Graph, b: _Binding, segs: _Segs, j: int, at_end: bool, cur: int, start_t: int, guard: int):
    """Walk back from node ``j`` (at its end, or at its start) down its run of chain bindings, as the node-by-node
    walk would: states E_i (at node i's end: its own segment) and S_i (at its start: the chain gap before it)
    alternate, E_j, S_j, E_(j-1), ... S_k, k the run's first node. Stops before S_k (its input is not the chain),
    at the first state whose time is not past ``start_t``, or after ``guard`` states. Returns the state reached
    (node, at_end, time) and the states used."""
    start, dur, gap = b.start, b.dur, g.gap
    k = b.run_first(j)
    idx = np.arange(j, k - 1, -1)
    t_end = np.empty(len(idx), np.int64)  # the walk's time at E_i: the node's end, or where the gap after it began
    t_end[0] = cur
    t_end[1:] = start[idx[:-1]] - gap[idx[:-1]]
    node = np.repeat(idx, 2)
    is_end = np.tile(np.array([True, False]), len(idx))
    t = np.stack([t_end, start[idx]], 1).ravel()
    if not at_end:
        node, is_end, t = node[1:], is_end[1:], t[1:]
        t[0] = cur
    past = t <= start_t
    n_vec = min(int(np.argmax(past)) if past.any() else len(t), guard, len(t) - 1)
    nd, e_state, tt = node[:n_vec], is_end[:n_vec], t[:n_vec]
    gp = gap[nd]
    emit = np.where(e_state, dur[nd] != 0, gp != 0)
    nd, e_state, tt, gp = nd[emit], e_state[emit], tt[emit], gp[emit]
    s_node = np.maximum(start[nd], start_t)
    s_gap = np.where(gp > 0, np.maximum(tt - gp, start_t), tt - gp)
    ctype = g.chain_type[g.chain[nd]]
    kind = np.where(e_state, g.kind[nd], np.asarray(CHAIN_GAP_KIND, np.int64)[ctype])
    unexplained = ~e_state & (gp > TOLERANCE_NS)
    segs.add(nd, nd, np.where(e_state, -1, _GAP), g.rank[nd], np.where(e_state, s_node, s_gap), tt, kind, unexplained)
    return int(node[n_vec]), bool(is_end[n_vec]), int(t[n_vec]), n_vec


def _crossing(g: Graph, names: _Names, t_node: int, arrival: int, start: np.ndarray) -> Crossing | None:
    """The walk came to a barrier from ``t_node`` (a rank's transfer) and leaves it for ``arrival``, the last
    rank to arrive. ``t_node - 1`` is the rank's own arrival (W and T are neighbours in their chain)."""
    frm, to = int(g.rank[t_node]), int(g.rank[arrival])
    if frm == to:
        return None
    wait = int(start[t_node] - start[t_node - 1])
    return Crossing(frm, to, names.node(t_node), str(g.dimension[t_node]), wait)


def _result(g: Graph, names: _Names, step: int, segs: _Segs, crossings, length: int, wins, end_w) -> StepPath:
    """Merge neighbouring segments of the same rank, lane, name, kind and explanation that touch, and sum them by
    kind, by (rank, kind), by dimension and by collective (dicts in order of first appearance on the path)."""
    node, lane_node, label, rank, s, e, kind, unex = segs.arrays()
    own = label < 0
    name = np.asarray(_LABELS, object)[np.maximum(label, 0)] if len(label) else np.empty(0, object)
    name[own] = names.nodes(node[own])
    lane = names.lanes(lane_node)
    dim_op = np.full(len(node), "", object)
    tr = own & (kind == TRANSFER)
    if tr.any():
        dims = np.array([str(d) or "unknown" for d in g.dimension[node[tr]]], object)
        dim_op[tr] = dims + "|" + names.ops(node[tr])
    same = np.zeros(len(node), bool)
    same[1:] = (
        (rank[1:] == rank[:-1])
        & (lane[1:] == lane[:-1])
        & (name[1:] == name[:-1])
        & (kind[1:] == kind[:-1])
        & (e[:-1] == s[1:])
        & (unex[1:] == unex[:-1])
    )
    first = np.flatnonzero(~same)
    last = np.append(first[1:] - 1, len(node) - 1).astype(np.int64)
    r, ln, nm, kd, dm, ux = rank[first], lane[first], name[first], kind[first], dim_op[first], unex[first] > 0
    gs, ge = s[first], e[last]
    span = ge - gs
    by_kind: dict[str, int] = {k: int(span[kd == i].sum()) for i, k in enumerate(KINDS)}
    by_rk: dict[tuple[int, str], int] = {}
    rk_code, rk_keys = pd.factorize((r + 1) * len(KINDS) + kd)
    rk_sum = np.zeros(len(rk_keys), np.int64)
    np.add.at(rk_sum, rk_code, span)
    for key, v in zip(rk_keys.tolist(), rk_sum.tolist()):
        by_rk[(key // len(KINDS) - 1, KINDS[key % len(KINDS)])] = v
    by_dim: dict[str, int] = {}
    by_coll: dict[str, int] = {}
    with_dim = dm != ""
    dim_of = np.full(len(first), "", object)
    if with_dim.any():
        d_code, d_keys = pd.factorize(dm[with_dim])
        d_sum = np.zeros(len(d_keys), np.int64)
        np.add.at(d_sum, d_code, span[with_dim])
        parts = [str(x).partition("|") for x in d_keys]
        for (dim, _, op), v in zip(parts, d_sum.tolist()):
            by_dim[dim] = by_dim.get(dim, 0) + v
            coll = f"{dim} {op}".strip()
            by_coll[coll] = by_coll.get(coll, 0) + v
        dim_of[with_dim] = np.array([p[0] for p in parts], object)[d_code]
    kinds = np.asarray(KINDS, object)[kd] if len(kd) else np.empty(0, object)
    with gc_paused():
        # tuple.__new__ straight: Segment._make's classmethod call and length check were a third of this
        out = tuple(
            map(
                tuple.__new__,
                repeat(Segment),
                zip(
                    r.tolist(),
                    ln.tolist(),
                    nm.tolist(),
                    (gs + g.base_ns).tolist(),
                    span.tolist(),
                    kinds.tolist(),
                    dim_of.tolist(),
                    ux.tolist(),
                ),
            )
        )
    unexplained = int(span[ux].sum())
    waits = _host_waits(g, min(w.start_ns for w in wins), max(w.end_ns for w in wins))
    complete = all(w.complete for w in wins)
    busy = names.device_busy(end_w)
    return StepPath(step, length, by_kind, by_dim, by_rk, by_coll, out, tuple(crossings), unexplained, waits, complete, busy)


def _host_waits(g: Graph, lo: int, hi: int) -> dict[str, int]:
    """The inferred host waits for the device (SYNC edges with a rule) whose host piece starts in [lo, hi], by rule."""
    m = (g.rule >= 0) & (g.start[g.dst] >= lo) & (g.start[g.dst] <= hi)
    counts = np.bincount(g.rule[m].astype(np.int64), minlength=len(WAIT_RULES))
    return {k: int(c) for k, c in zip(WAIT_RULES, counts.tolist()) if c}
