"""Replaying the dependency graph (tracekit.analyzers.graph.build) with changed durations, and what-if predictions.

A replay computes every node's start in chain order: within a chain ``start = P + cummax(ext - P)`` where P is
the chain's prefix sum of durations and gaps and ``ext`` the largest input from outside the chain (a fixed
start or an edge), a max-plus scan done with numpy; edges are re-evaluated until nothing moves (as many rounds
as the longest alternation of chains along any dependency path). Durations only shrink or grow node by node and
every dependency is kept, so scaling durations down never predicts a later end (max-plus is monotone).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...loader.patterns import check_pattern, compile_pattern
from ...model.events import EventKind
from ...model.traceset import TraceSet
from .. import intervals as iv
from .build import COMPUTE, HOST_CHAIN, NEG, TRANSFER, Graph, build_graph
from .host_edges import sorted_unique

MAX_ROUNDS = 100_000


def replay(g: Graph, dur: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """(start of every node, rounds) of the whole graph with durations ``dur`` (the measured ones when None)."""
    dur = g.dur if dur is None else np.asarray(dur, np.int64)
    t, rounds = _replay(g.first, g.gap, g.fixed, dur, g.src, g.dst, g.anchor_end, g.delay)
    assert t is not None
    return t, rounds


BLOCK_NODES = 4096  # nodes per block of the blocked replay (tests set it small to exercise the blocks)
SORT_AFTER = 4  # windows replayed with one ReplayIndex before it sorts the whole graph by start
SHALLOW_ROUNDS = 16  # a step that converges within this many rounds as one block is not cut into blocks


class ReplayIndex:
    """What every step's replay needs from the whole graph, built once: nodes sorted by measured start, edges by
    destination (CSR), and scratch arrays of the graph's size that each replay leaves as it found them, so that a
    step costs its own nodes and edges, not the graph's (replaying 60 steps of a 2.5 M-node graph used to allocate
    and scan ~10 full-size arrays per step). Not thread-safe: one replay at a time per index."""

    def __init__(self, g: Graph) -> None:
        n = len(g)
        self.g, self.calls = g, 0
        self.by_start: np.ndarray | None = None  # sorted on the SORT_AFTER-th window (a few steps: masks are cheaper)
        self.sorted_start = np.empty(0, np.int64)
        self._csr: tuple[np.ndarray, np.ndarray] | None = None  # edges by destination node: when first asked
        # edges by their destination's start: a window's incoming edges are one slice (no pass over the window)
        self.e_by_dst_start = np.argsort(g.start[g.dst], kind="stable")
        self.dst_start = g.start[g.dst][self.e_by_dst_start]
        self._by_src_start: tuple[np.ndarray, np.ndarray] | None = None
        self.block = np.full(n, -1, np.int64)
        self.in_b, self.pos = np.zeros(n, bool), np.full(n, -1, np.int64)
        self.t_all, self.d_all = g.start.copy(), g.dur.copy()

    def window(self, lo: int, hi: int) -> np.ndarray:
        """The nodes that start within [lo, hi], by node id (the mask gives that order for free; most steps never
        need start order, and scattering through ids in order is several times faster on a large step)."""
        g = self.g
        self.calls += 1
        if self.by_start is None and self.calls < SORT_AFTER:
            return np.flatnonzero((g.start >= lo) & (g.start <= hi))
        if self.by_start is None:
            self.by_start = np.argsort(g.start, kind="stable")
            self.sorted_start = g.start[self.by_start]
        a, b = np.searchsorted(self.sorted_start, lo, "left"), np.searchsorted(self.sorted_start, hi, "right")
        return np.sort(self.by_start[a:b])

    def edges_into_window(self, lo: int, hi: int) -> np.ndarray:
        """The edges whose destination starts within [lo, hi]."""
        a, b = np.searchsorted(self.dst_start, lo, "left"), np.searchsorted(self.dst_start, hi, "right")
        return self.e_by_dst_start[a:b]

    def edges_from_window(self, lo: int, hi: int) -> np.ndarray:
        """The edges whose source starts within [lo, hi]."""
        if self._by_src_start is None:
            order = np.argsort(self.g.start[self.g.src], kind="stable")
            self._by_src_start = order, self.g.start[self.g.src][order]
        order, keys = self._by_src_start
        return order[np.searchsorted(keys, lo, "left") : np.searchsorted(keys, hi, "right")]

    def edges_into(self, nodes: np.ndarray) -> np.ndarray:
        """The edges whose destination is one of ``nodes`` (grouped by node, in the order of ``nodes``)."""
        if self._csr is None:
            self._csr = _csr(self.g.dst, len(self.g))
        return _gather(*self._csr, nodes)


def _csr(ends: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Edges grouped by one end (stable: by edge id within a node) and each node's offset into them."""
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=n), out=ptr[1:])
    return np.argsort(ends, kind="stable"), ptr


def _gather(order: np.ndarray, ptr: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    counts = ptr[nodes + 1] - ptr[nodes]
    if not len(counts):
        return np.empty(0, np.int64)
    first = np.repeat(ptr[nodes] - np.cumsum(counts) + counts, counts)  # slot i of node k: ptr[k] + i
    return order[first + np.arange(int(counts.sum()))]


def replay_window(
    g: Graph, dur: np.ndarray, lo: int, hi: int, index: ReplayIndex | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Replay of the nodes that start within [lo, hi] (a step), everything before ``lo`` kept as measured:
    (the nodes, by id, their starts, rounds). Nodes after ``hi`` cannot bound the step (every edge and chain edge
    goes forward in measured time), so they are left out. ``index``: a ReplayIndex of ``g`` to reuse across
    steps (built when None).

    Measured start order is a topological order of the graph, so the window is solved in blocks of about
    BLOCK_NODES nodes in that order, each with the blocks before it final: a block needs as many rounds as
    chains alternate inside it, not along the whole step (a step of 200 collectives on 64 ranks: ~800 rounds
    over the whole window, ~15 per block). Where the measurement contradicts that order (an edge from a later
    block, clocks), the window is one block."""
    ix = index if index is not None else ReplayIndex(g)
    whole = ix.window(lo, hi)
    if not len(whole):
        return whole, np.empty(0, np.int64), 0
    e_win = ix.edges_into_window(lo, hi)  # the edges into the window's nodes
    t_all, d_all = ix.t_all, ix.d_all
    in_b, pos = ix.in_b, ix.pos  # scratch, reset after each block
    d_all[whole] = dur[whole]
    rounds = 0
    try:
        if len(whole) > BLOCK_NODES:  # a shallow step converges in a few rounds as one block: try that first
            in_b[whole] = True
            t_w, rounds = _solve_block(g, whole, in_b, pos, e_win, t_all, d_all, SHALLOW_ROUNDS)
            in_b[whole] = False
            if t_w is not None:
                return whole, t_w, rounds
        win = whole[np.argsort(g.start[whole], kind="stable")]  # blocks in measured start order, ties by id
        times = g.start[win]
        cuts = [0]
        while cuts[-1] + BLOCK_NODES < len(win):  # block starts at distinct times: ties never split
            cuts.append(int(np.searchsorted(times, times[cuts[-1] + BLOCK_NODES], side="left")))
            if cuts[-1] == cuts[-2]:
                cuts[-1] = int(np.searchsorted(times, times[cuts[-2]], side="right"))
        cuts = sorted(set(c for c in cuts if c < len(win))) + [len(win)]
        if len(cuts) <= 2:  # one block (all of it at tied times): solved without the shallow try's rounds
            rounds = 0
        block = ix.block
        block[win] = np.repeat(np.arange(len(cuts) - 1), np.diff(cuts))
        if (block[g.src[e_win]] > block[g.dst[e_win]]).any():
            cuts = [0, len(win)]
            block[whole] = 0
        e_win = e_win[np.argsort(block[g.dst[e_win]], kind="stable")]
        e_cut = np.searchsorted(block[g.dst[e_win]], np.arange(len(cuts)))
        block[whole] = -1
        for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            nodes_b = np.sort(win[a:b])
            in_b[nodes_b] = True
            t_b, r = _solve_block(g, nodes_b, in_b, pos, e_win[e_cut[i] : e_cut[i + 1]], t_all, d_all)
            in_b[nodes_b] = False
            assert t_b is not None
            t_all[nodes_b] = t_b
            rounds += r
        return whole, t_all[whole].copy(), rounds
    finally:  # leave the scratch as measured
        t_all[whole], d_all[whole], in_b[whole] = g.start[whole], g.dur[whole], False


def _solve_block(
    g: Graph,
    nodes_b: np.ndarray,
    in_b: np.ndarray,
    pos: np.ndarray,
    e_in: np.ndarray,
    t_all: np.ndarray,
    d_all: np.ndarray,
    give_up: int = MAX_ROUNDS,
):
    """Starts of ``nodes_b`` (sorted; flagged in ``in_b``) with every other node frozen at ``t_all`` / ``d_all``.
    ``pos`` is all -1 scratch of the graph's size and is left so. Costs the block's size, not the graph's."""
    head = nodes_b[~g.first[nodes_b] & ~in_b[np.maximum(nodes_b - 1, 0)]]  # first block node of a chain
    preds = head - 1
    outer = sorted_unique(g.src[e_in][~in_b[g.src[e_in]]])
    outer = outer[~np.isin(outer, preds)]  # np.setdiff1d, without numpy 2.4's slow hashing unique
    # the sub-graph's chains: each outer source on its own (first, in reverse), then the block's nodes and their
    # chain predecessors by (chain, id), which is id order, the graph's nodes being sorted by chain: a merge of
    # two sorted runs (timsort), not a lexsort of the block
    inner = np.sort(np.concatenate([nodes_b, preds]), kind="stable")
    nodes = np.concatenate([outer[::-1], inner])
    key = np.concatenate([-len(outer) + np.arange(len(outer)), g.chain[inner]])
    first = np.ones(len(nodes), bool)
    first[1:] = key[1:] != key[:-1]
    frozen = ~in_b[nodes]
    fixed = np.where(frozen, t_all[nodes], g.fixed[nodes])
    pos[nodes] = np.arange(len(nodes))
    src, dst = pos[g.src[e_in]], pos[g.dst[e_in]]
    pos[nodes] = -1
    t, rounds = _replay(first, g.gap[nodes], fixed, d_all[nodes], src, dst, g.anchor_end[e_in], g.delay[e_in], give_up)
    if t is None:
        return None, rounds
    return t[~frozen], rounds  # the block's nodes, in id order


def _replay(first, gap, fixed, dur, src, dst, anchor_end, delay, give_up: int = MAX_ROUNDS):
    """(starts, rounds), or (None, rounds) when ``give_up`` rounds were not enough."""
    n = len(first)
    first_idx = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    chain_rank = np.cumsum(first) - 1
    inc = np.zeros(n, np.int64)
    inc[1:] = dur[:-1]
    inc = np.where(first, 0, inc + gap)
    c = np.cumsum(inc)
    prefix = c - c[first_idx]
    order = np.argsort(dst, kind="stable")
    e_dst, e_src, e_anchor, e_delay = dst[order], src[order], anchor_end[order], delay[order]
    dsts, starts = np.unique(e_dst, return_index=True)
    t = _scan_chains(fixed, prefix, chain_rank)
    for rounds in range(1, give_up):
        ext = fixed.copy()
        if len(e_dst):
            vals = t[e_src] + np.where(e_anchor, dur[e_src], 0) + e_delay
            ext[dsts] = np.maximum(ext[dsts], np.maximum.reduceat(vals, starts))
        new = _scan_chains(ext, prefix, chain_rank)
        if np.array_equal(new, t):
            return t, rounds
        t = new
    if give_up < MAX_ROUNDS:
        return None, give_up
    raise RuntimeError("replay did not converge: the graph has a cycle")


def _scan_chains(ext: np.ndarray, prefix: np.ndarray, chain_rank: np.ndarray) -> np.ndarray:
    """start = prefix + segmented cummax(ext - prefix), segments = chains. Values are taken relative to the
    earliest finite input; a node no input has reached yet (-1 after clipping) stays NEG; chains are offset so
    that none sees its predecessor's maximum. In place on one work array (a large step's replay is mostly these
    passes: a temporary per operation cost ~40 % more)."""
    if not len(ext):
        return ext.copy()
    finite = ext > NEG // 2
    x = ext - prefix
    base = int(np.min(x, where=finite, initial=np.iinfo(np.int64).max)) if finite.any() else 0
    x -= base
    np.copyto(x, -1, where=~finite)
    span = int(x.max()) + 2
    if span * (int(chain_rank[-1]) + 1) >= 2**62:
        raise OverflowError("replay: trace too long for the int64 scan")
    off = chain_rank * span
    x += off
    np.maximum.accumulate(x, out=x)
    x -= off
    unreached = x < 0
    x += prefix
    x += base
    np.copyto(x, NEG, where=unreached)
    return x


# --- what-if specs ---------------------------------------------------------------------------------------

MAX_FACTOR = 1e6  # a what-if factor: x10^6 is past any real question, and keeps every product inside int64 ns


@dataclass(frozen=True, slots=True)
class Spec:
    """One duration change: ``comm:DIM=F``, ``kernel:REGEX=F``, ``annotation:NAME=F``, ``rank:R:host=F``."""

    what: str  # comm, kernel, annotation, rank
    key: str
    factor: float
    text: str

    @staticmethod
    def parse(text: str) -> Spec:
        what, _, rest = text.partition(":")
        key, eq, factor = rest.rpartition("=")
        try:
            f = float(factor)
        except ValueError:
            f = -1.0
        if what not in ("comm", "kernel", "annotation", "rank") or not eq or not key or not 0 <= f <= MAX_FACTOR:
            raise ConfigError(
                f"--set {text!r}: expected comm:DIM=F, kernel:REGEX=F, annotation:NAME=F or "
                f"rank:R:host=F with a factor F from 0 to {MAX_FACTOR:g} (0.5 halves the time)"
            )
        if what == "rank":
            r, _, part = key.partition(":")
            if not r.lstrip("-").isdigit() or part != "host":
                raise ConfigError(f"--set {text!r}: expected rank:R:host=F, e.g. rank:3:host=0.5")
        if what == "kernel":  # RE2 as for --comm-pattern: Python's re backtracks for hours on '(.*a){20}$'
            check_pattern(key, f"--set {text!r}")
        return Spec(what, key, f, text)


def scaled_durations(g: Graph, traces: TraceSet, specs: Sequence[Spec]) -> tuple[np.ndarray, list[str]]:
    """The graph's durations with every spec applied (factors multiply where specs overlap), and a note for
    each spec that matched nothing."""
    factor = np.ones(len(g))
    notes = []
    for spec in specs:
        hit = _matches(g, traces, spec)
        if not hit.any():
            notes.append(f"--set {spec.text}: matches nothing in the trace")
        factor[hit] *= spec.factor
    # inf or 1e300 used to wrap around int64 (the prediction came out equal to the measurement); the parse bounds
    # F, the clip bounds the product
    return np.rint(np.minimum(g.dur * factor, 2.0**62)).astype(np.int64), notes


def _matches(g: Graph, traces: TraceSet, spec: Spec) -> np.ndarray:
    host = g.chain_type[g.chain] == HOST_CHAIN
    if spec.what == "comm":
        # a handful of distinct dimensions over millions of nodes: compare each once
        codes, dims = pd.factorize(g.dimension, use_na_sentinel=False)
        want = np.array([str(d).lower() == spec.key.lower() for d in dims] + [False], bool)
        return (g.kind == TRANSFER) & want[codes]
    if spec.what == "rank":
        return host & (g.rank == int(spec.key.partition(":")[0]))
    hit = np.zeros(len(g), bool)
    for r, t in traces:
        on = np.flatnonzero(g.rank == r)
        if spec.what == "kernel":
            pat, _ = compile_pattern(spec.key)
            names = np.array([bool(pat.search(s)) for s in t.strings] + [False], bool)
            rows = g.row[on]
            nid = np.where(rows >= 0, t["name_id"][np.maximum(rows, 0)], -1)
            is_kernel = (g.kind[on] == COMPUTE) & ~host[on]
            hit[on] = is_kernel & names[np.where(nid < 0, len(t.strings), nid)]
        else:
            hit[on] = host[on] & _inside_annotation(g, t, r, on, spec.key)
    return hit


def _inside_annotation(g: Graph, t, r: int, on: np.ndarray, name: str) -> np.ndarray:
    """Host pieces of rank ``r`` inside an op or annotation called ``name`` on the same thread."""
    sid = t.string_id(name)
    rows = np.flatnonzero((t["name_id"] == sid) & (t["device"] < 0)) if sid >= 0 else np.empty(0, np.int64)
    if not len(rows) or not len(on):
        return np.zeros(len(on), bool)
    shift = g.shifts[r]
    lanes = np.unique(np.concatenate([t["stream"][rows], g.chain_lane[g.chain[on]]]))
    lo = min(int(t["ts_ns"][rows].min()) - shift, int(g.start[on].min()))
    B = iv.key_stride(len(lanes), lo, int(t.end_ns[rows].max()) - shift, int((g.start[on] + np.maximum(g.dur[on], 1)).max()))
    ann = iv.union(
        np.searchsorted(lanes, t["stream"][rows]) * B + (t["ts_ns"][rows] - shift - lo),
        np.searchsorted(lanes, t["stream"][rows]) * B + (t.end_ns[rows] - shift - lo),
    )
    plane = np.searchsorted(lanes, g.chain_lane[g.chain[on]])
    ps = plane * B + (g.start[on] - lo)
    pe = ps + np.maximum(g.dur[on], 1)
    # a piece is inside when its measured span is covered (pieces are cut at every op boundary)
    span_end = ps + np.maximum((g.start[on] + g.dur[on]) - g.start[on], 1)
    return iv.overlap_each(ann, ps, np.maximum(pe, span_end)) > 0


# --- step times ------------------------------------------------------------------------------------------


def predicted_step_times(g: Graph, dur: np.ndarray) -> tuple[dict[int, int], int]:
    """Per step, replayed from its measured start: the latest replayed window end over ranks (the latest end of its
    end nodes, plus the window's tail after them) minus the earliest measured window start. Also the most rounds a
    step took."""
    out: dict[int, int] = {}
    most = 0
    index = ReplayIndex(g)
    for step, wins in _by_step(g).items():
        lo, hi = min(w.start_ns for w in wins), max(w.end_ns for w in wins)
        nodes, t, rounds = replay_window(g, dur, lo, hi, index)
        most = max(most, rounds)
        at = dict(zip(*_at(index, nodes, t, [n for w in wins for n in w.end_nodes])))
        # a step is replayed from its measured start; an end node before the window is as measured
        e = max(
            max(at[n] + int(dur[n]) if n in at else int(g.start[n] + g.dur[n]) for n in w.end_nodes) + w.tail_ns for w in wins
        )
        out[step] = e - lo
    return out, most


def _at(index: ReplayIndex, nodes: np.ndarray, t: np.ndarray, wanted: list[int]) -> tuple[list[int], list[int]]:
    """(wanted nodes found among ``nodes``, their replayed starts), through the index's scratch (left all -1)."""
    q = np.asarray(wanted, np.int64)
    slot = index.pos
    slot[nodes] = np.arange(len(nodes))
    i = slot[q]
    slot[nodes] = -1
    hit = i >= 0
    return q[hit].tolist(), t[i[hit]].tolist()


def _by_step(g: Graph) -> dict[int, list]:
    steps: dict[int, list] = {}
    for w in g.windows:
        steps.setdefault(w.step, []).append(w)
    return dict(sorted(steps.items()))


def measured_step_times(g: Graph) -> dict[int, int]:
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for w in g.windows:
        lo[w.step] = min(lo.get(w.step, w.start_ns), w.start_ns)
        hi[w.step] = max(hi.get(w.step, w.end_ns), w.end_ns)
    return {k: hi[k] - lo[k] for k in sorted(lo)}


@dataclass(frozen=True, slots=True)
class StepPrediction:
    step: int
    measured_ns: int
    predicted_ns: int
    replayed_ns: int  # the unchanged graph's replay (equals measured_ns when the graph is complete)

    @property
    def ratio(self) -> float:
        return self.predicted_ns / self.measured_ns if self.measured_ns else 1.0

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "measured_us": self.measured_ns / 1e3,
            "predicted_us": self.predicted_ns / 1e3,
            "ratio": self.ratio,
        }


@dataclass(frozen=True, slots=True)
class WhatIf:
    specs: tuple[str, ...]
    steps: tuple[StepPrediction, ...]
    replay_error: float  # max over steps of |identity replay - measured| / measured
    rounds: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {
            "specs": list(self.specs),
            "steps": [s.to_dict() for s in self.steps],
            "replay_error": self.replay_error,
            "notes": list(self.notes),
        }


def whatif(
    traces: TraceSet, specs: Sequence[str | Spec] = (), *, windows: str | None = None, graph: Graph | None = None, comm=None
) -> WhatIf:
    """Measured vs predicted time of every step with the durations changed by ``specs``; the replay of the
    unchanged graph is always run and its error reported. ``comm``: a CommResult to reuse (its clock offsets
    and dimensions are the graph's)."""
    parsed = [s if isinstance(s, Spec) else Spec.parse(s) for s in specs]
    g = graph if graph is not None else build_graph(traces, windows, comm)
    dur, notes = scaled_durations(g, traces, parsed)
    measured = measured_step_times(g)
    replayed, rounds = predicted_step_times(g, g.dur)
    predicted = predicted_step_times(g, dur)[0] if parsed else replayed
    steps = tuple(StepPrediction(k, measured[k], predicted[k], replayed[k]) for k in measured)
    err = max((abs(s.replayed_ns - s.measured_ns) / s.measured_ns for s in steps if s.measured_ns), default=0.0)
    if not steps:
        notes.append("no step windows found (ProfilerStep#N, or the annotation given as windows)")
    return WhatIf(tuple(s.text for s in parsed), steps, err, rounds, tuple(notes))


__all__ = ["Spec", "StepPrediction", "WhatIf", "replay", "whatif", "EventKind"]
