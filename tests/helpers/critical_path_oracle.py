"""The oracle for tracekit.analyzers.graph.critical_path: a verbatim copy of its previous implementation (a Python walk
node by node, a Python merge of segments), kept so that tests/unit/analyzers/test_critical_path_fast.py can check
the vectorised walk against it on every trace in tests/data. Do not optimise this file: its slowness is the point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tests.helpers.whatif_oracle import replay_window
from tracekit.analyzers.graph.build import (
    ARRIVE,
    BARRIER_CHAIN,
    CHAIN_GAP_KIND,
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
from tracekit.analyzers.graph.whatif import Spec, scaled_durations
from tracekit.model.traceset import TraceSet

_EDGE_NAMES = {LAUNCH: "(launch latency)", SYNC: "(sync return)", ARRIVE: "(arrival)", RELEASE: "(last arrival)"}


@dataclass(frozen=True, slots=True)
class Segment:
    rank: int
    lane: str  # "thread 123", "stream 7", "gloo thread 9" or "" for residuals between ranks
    name: str
    start_ns: int  # on the reference rank's clock, absolute
    dur_ns: int
    kind: str
    dimension: str = ""

    def to_dict(self) -> dict:
        d = {
            "rank": self.rank,
            "lane": self.lane,
            "name": self.name,
            "start_us": self.start_ns / 1e3,
            "dur_us": self.dur_ns / 1e3,
            "kind": self.kind,
        }
        if self.dimension:
            d["dimension"] = self.dimension
        return d


@dataclass(frozen=True, slots=True)
class Crossing:
    """The path leaves rank ``from_rank`` at a collective for ``to_rank``, the last to arrive."""

    from_rank: int
    to_rank: int
    name: str
    dimension: str
    wait_ns: int  # how long from_rank waited in the collective for to_rank


@dataclass(frozen=True, slots=True)
class StepPath:
    step: int
    length_ns: int
    by_kind_ns: dict[str, int]
    by_dimension_ns: dict[str, int]
    by_rank_kind_ns: dict[tuple[int, str], int]
    by_collective_ns: dict[str, int]  # "dimension op" -> transfer on the path (e.g. "tp all_gather")
    segments: tuple[Segment, ...]
    crossings: tuple[Crossing, ...]

    @property
    def verdict(self) -> str:
        return f"step {self.step}: " + _shares(self.length_ns, self.by_rank_kind_ns, self.by_collective_ns, self.crossings)

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "length_us": self.length_ns / 1e3,
            "by_kind": {k: self.by_kind_ns.get(k, 0) / 1e3 for k in KINDS},
            "by_dimension": {k: v / 1e3 for k, v in sorted(self.by_dimension_ns.items())},
            "by_collective": {k: v / 1e3 for k, v in sorted(self.by_collective_ns.items())},
            "verdict": self.verdict,
            "segments": [s.to_dict() for s in self.segments],
        }


@dataclass(frozen=True, slots=True)
class CriticalPaths:
    steps: tuple[StepPath, ...]
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """What bounds the run: the kinds summed over the steps."""
        if not self.steps:
            return "no steps"
        total = sum(s.length_ns for s in self.steps)
        rk: dict[tuple[int, str], int] = {}
        dims: dict[str, int] = {}
        for s in self.steps:
            for k, v in s.by_rank_kind_ns.items():
                rk[k] = rk.get(k, 0) + v
            for k2, v in s.by_collective_ns.items():
                dims[k2] = dims.get(k2, 0) + v
        cross = tuple(c for s in self.steps for c in s.crossings)
        n = len(self.steps)
        return f"{n} step{'s' if n != 1 else ''}: " + _shares(total, rk, dims, cross)

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "steps": [s.to_dict() for s in self.steps], "notes": list(self.notes)}


def _shares(total: int, by_rank_kind: dict[tuple[int, str], int], colls: dict[str, int], crossings: Sequence[Crossing]) -> str:
    """ "61 % compute on rank 2, 22 % tp all_gather transfer on rank 2, 8 % host on rank 3; the path waits for
    rank 3 at 4 collectives (...)": the five largest (rank, kind) shares of the path, those under 1 % left out."""
    if total <= 0:
        return "empty"
    labels = {"idle": "idle (gaps between device work)", "comm_wait": "waiting in collectives", "memcpy": "memcpy/memset"}
    if colls:
        d, _ = max(colls.items(), key=lambda kv: kv[1])
        labels["comm_transfer"] = f"{d} transfer" if len(colls) == 1 else f"transfer (most in {d})"
    parts = []
    for (r, k), v in sorted(by_rank_kind.items(), key=lambda kv: -kv[1]):
        pct = round(100 * v / total)
        if pct >= 1:
            parts.append(f"{pct} % {labels.get(k, k)}" + (f" on rank {r}" if r >= 0 else ""))
    text = ", ".join(parts[:5]) + (f" and {len(parts) - 5} smaller shares" if len(parts) > 5 else "")
    if crossings:
        late: dict[int, int] = {}
        for c in crossings:
            late[c.to_rank] = late.get(c.to_rank, 0) + c.wait_ns
        r, w = max(late.items(), key=lambda kv: kv[1])
        n = sum(1 for c in crossings if c.to_rank == r)
        text += f"; the path waits for rank {r} at {n} collective{'s' if n > 1 else ''} ({w / 1e3:,.1f} µs of waiting)"
    return text


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
        b = _Binding(g, g.start, g.dur)
        return CriticalPaths(tuple(_walk(g, b, names, s, ws) for s, ws in sorted(steps.items())), g.notes)
    dur, notes = scaled_durations(g, traces, [x if isinstance(x, Spec) else Spec.parse(x) for x in specs])
    out = []
    for step, ws in sorted(steps.items()):
        lo, hi = min(w.start_ns for w in ws), max(w.end_ns for w in ws)
        nodes, t, _ = replay_window(g, dur, lo, hi)
        start, d = g.start.copy(), g.dur.copy()
        start[nodes], d[nodes] = t, dur[nodes]
        out.append(_walk(g, _Binding(g, start, d), names, step, ws))
    return CriticalPaths(tuple(out), g.notes + tuple(notes))


class _Binding:
    """For each node, which input bound its start (measured, or replayed): -1 chain, -2 fixed, else the edge."""

    def __init__(self, g: Graph, start: np.ndarray, dur: np.ndarray) -> None:
        n = len(g)
        self.start, self.dur = start, dur
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


class _Names:
    def __init__(self, g: Graph, traces: TraceSet) -> None:
        self.g = g
        self.tables = dict(traces.tables)

    def node(self, j: int) -> str:
        g = self.g
        row, r = int(g.row[j]), int(g.rank[j])
        ctype = g.chain_type[g.chain[j]]
        if ctype == BARRIER_CHAIN:
            return "(last arrival)"
        if row < 0:
            return "(host gap)" if ctype == HOST_CHAIN else "(gap)"
        t = self.tables[r]
        name = t.string(int(t["name_id"][row])) or ""
        return name + (" (arrival)" if g.kind[j] == WAIT else "")

    def op(self, j: int) -> str:
        row, r = int(self.g.row[j]), int(self.g.rank[j])
        t = self.tables.get(r)
        return (t.string(int(t["coll_op_id"][row])) or "") if t is not None and row >= 0 else ""

    def lane(self, j: int) -> str:
        g = self.g
        c = g.chain[j]
        kind = ("thread", "stream", "gloo thread", "")[int(g.chain_type[c])]
        return f"{kind} {int(g.chain_lane[c])}" if kind else ""


def _walk(g: Graph, b: _Binding, names: _Names, step: int, wins) -> StepPath:
    start, dur = b.start, b.dur
    start_t = min(int(start[w.start_node]) for w in wins)
    end_w = max(wins, key=lambda w: int(start[w.end_node] + dur[w.end_node]))
    j = end_w.end_node
    segs: list[tuple[int, str, str, int, int, int, str]] = []
    crossings: list[Crossing] = []
    cur = int(start[j] + dur[j])
    at_end = True
    came_from = -1
    guard = 4 * len(g) + 10
    while cur > start_t and guard > 0:
        guard -= 1
        if at_end:
            s = int(start[j])
            if dur[j]:
                segs.append(_node_seg(g, names, j, max(s, start_t), cur))
            cur, at_end = s, False
            continue
        k = int(b.bind[j])
        if k == -1:
            ctype = int(g.chain_type[g.chain[j]])
            gap = int(g.gap[j])
            if gap:  # negative where measured activities of a stream overlap (rounding): kept, so sums stay exact
                segs.append(
                    (
                        int(g.rank[j]),
                        names.lane(j),
                        "(gap)",
                        max(cur - gap, start_t) if gap > 0 else cur - gap,
                        cur,
                        CHAIN_GAP_KIND[ctype],
                        "",
                    )
                )
            cur -= gap
            j, at_end = j - 1, True
        elif k >= 0:
            src = int(g.src[k])
            anchor = int(start[src] + (dur[src] if g.anchor_end[k] else 0))
            if cur != anchor:  # negative only where the measurement contradicts causality (clocks, rounding)
                et = int(g.etype[k])
                segs.append(
                    (
                        int(g.rank[j]) if g.rank[j] >= 0 else int(g.rank[src]),
                        "",
                        _EDGE_NAMES.get(et, "(dependency)"),
                        max(anchor, start_t) if cur > anchor else anchor,
                        cur,
                        EDGE_KIND[et],
                        "",
                    )
                )
            if int(g.etype[k]) == RELEASE:
                came_from = j
            elif int(g.etype[k]) == ARRIVE and came_from >= 0:
                c = _crossing(g, names, came_from, src, start)
                if c is not None:
                    crossings.append(c)
            cur, j, at_end = anchor, src, bool(g.anchor_end[k])
        else:
            segs.append((int(g.rank[j]), names.lane(j), "(before the first event)", start_t, cur, IDLE, ""))
            cur = start_t
    return _result(g, step, segs, crossings, int(start[end_w.end_node] + dur[end_w.end_node]) - start_t)


def _crossing(g: Graph, names: _Names, t_node: int, arrival: int, start: np.ndarray) -> Crossing | None:
    """The walk came to a barrier from ``t_node`` (a rank's transfer) and leaves it for ``arrival``, the last
    rank to arrive. ``t_node - 1`` is the rank's own arrival (W and T are neighbours in their chain)."""
    frm, to = int(g.rank[t_node]), int(g.rank[arrival])
    if frm == to:
        return None
    wait = int(start[t_node] - start[t_node - 1])
    return Crossing(frm, to, names.node(t_node), str(g.dimension[t_node]), wait)


def _node_seg(g: Graph, names: _Names, j: int, s: int, e: int):
    kind = int(g.kind[j])
    dim = (str(g.dimension[j]) or "unknown") if kind == TRANSFER else ""
    if dim:
        dim += "|" + names.op(j)
    return (int(g.rank[j]), names.lane(j), names.node(j), s, e, kind, dim)


def _result(g: Graph, step: int, segs, crossings, length: int) -> StepPath:
    segs = segs[::-1]
    merged: list[list] = []
    for r, lane, name, s, e, kind, dim in segs:
        if merged and merged[-1][:3] == [r, lane, name] and merged[-1][5] == kind and merged[-1][4] == s:
            merged[-1][4] = e
        else:
            merged.append([r, lane, name, s, e, kind, dim])
    by_kind: dict[str, int] = {k: 0 for k in KINDS}
    by_dim: dict[str, int] = {}
    by_coll: dict[str, int] = {}
    by_rk: dict[tuple[int, str], int] = {}
    out = []
    for r, lane, name, s, e, kind, dim_op in merged:
        k = KINDS[kind]
        by_kind[k] += e - s
        by_rk[(r, k)] = by_rk.get((r, k), 0) + e - s
        dim, _, op = dim_op.partition("|")
        if dim:
            by_dim[dim] = by_dim.get(dim, 0) + e - s
            coll = f"{dim} {op}".strip()
            by_coll[coll] = by_coll.get(coll, 0) + e - s
        out.append(Segment(r, lane, name, s + g.base_ns, e - s, k, dim))
    return StepPath(step, length, by_kind, by_dim, by_rk, by_coll, tuple(out), tuple(crossings))
