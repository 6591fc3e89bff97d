"""The oracle for tracekit.analyzers.graph.whatif's windowed replay: a verbatim copy of its previous implementation, which
allocated and scanned arrays of the whole graph's size for every step (quadratic in a long trace's events, but
simple). tests/integration/test_critical_path_fast.py checks the indexed replay against it on every trace in
tests/data. Do not optimise this file.
"""

from __future__ import annotations

import numpy as np

from tracekit.analyzers.graph.build import NEG, Graph

MAX_ROUNDS = 100_000


def predicted_step_times(g: Graph, dur: np.ndarray) -> tuple[dict[int, int], int]:
    out: dict[int, int] = {}
    most = 0
    steps: dict[int, list] = {}
    for w in g.windows:
        steps.setdefault(w.step, []).append(w)
    for step, wins in sorted(steps.items()):
        lo, hi = min(w.start_ns for w in wins), max(w.end_ns for w in wins)
        nodes, t, rounds = replay_window(g, dur, lo, hi)
        most = max(most, rounds)
        at = np.full(len(g), NEG, np.int64)
        at[nodes] = t
        s = min(int(at[w.start_node]) for w in wins)
        e = max(int(at[w.end_node] + dur[w.end_node]) for w in wins)
        out[step] = e - s
    return out, most


BLOCK_NODES = 4096  # nodes per block of the blocked replay (tests set it small to exercise the blocks)
SHALLOW_ROUNDS = 16  # a step that converges within this many rounds as one block is not cut into blocks


def replay_window(g: Graph, dur: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Replay of the nodes that start within [lo, hi] (a step), everything before ``lo`` kept as measured:
    (the nodes, their starts, rounds). Nodes after ``hi`` cannot bound the step (every edge and chain edge
    goes forward in measured time), so they are left out.

    Measured start order is a topological order of the graph, so the window is solved in blocks of about
    BLOCK_NODES nodes in that order, each with the blocks before it final: a block needs as many rounds as
    chains alternate inside it, not along the whole step (a step of 200 collectives on 64 ranks: ~800 rounds
    over the whole window, ~15 per block). Where the measurement contradicts that order (an edge from a later
    block, clocks), the window is one block."""
    inside = (g.start >= lo) & (g.start <= hi)
    win = np.flatnonzero(inside)
    if not len(win):
        return win, np.empty(0, np.int64), 0
    win = win[np.argsort(g.start[win], kind="stable")]
    times = g.start[win]
    cuts = [0]
    while cuts[-1] + BLOCK_NODES < len(win):  # block starts at distinct times: ties never split
        cuts.append(int(np.searchsorted(times, times[cuts[-1] + BLOCK_NODES], side="left")))
        if cuts[-1] == cuts[-2]:
            cuts[-1] = int(np.searchsorted(times, times[cuts[-2]], side="right"))
    cuts = sorted(set(c for c in cuts if c < len(win))) + [len(win)]
    block = np.full(len(g), -1, np.int64)
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        block[win[a:b]] = i
    e_win = np.flatnonzero(inside[g.dst])
    if (block[g.src[e_win]] > block[g.dst[e_win]]).any():
        cuts = [0, len(win)]
        block[win] = 0
    e_win = e_win[np.argsort(block[g.dst[e_win]], kind="stable")]
    e_cut = np.searchsorted(block[g.dst[e_win]], np.arange(len(cuts)))
    t_all, d_all = g.start.copy(), np.where(inside, dur, g.dur)
    in_b, pos = np.zeros(len(g), bool), np.full(len(g), -1, np.int64)  # scratch, reset after each block
    if len(cuts) > 2:  # a shallow step converges in a few rounds as one block: try that first
        in_b[win] = True
        whole = np.sort(win)
        t_w, rounds = _solve_block(g, whole, in_b, pos, e_win, t_all, d_all, SHALLOW_ROUNDS)
        in_b[win] = False
        if t_w is not None:
            t_all[whole] = t_w
            return win, t_all[win], rounds
    else:
        rounds = 0
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        nodes_b = np.sort(win[a:b])
        in_b[nodes_b] = True
        t_b, r = _solve_block(g, nodes_b, in_b, pos, e_win[e_cut[i] : e_cut[i + 1]], t_all, d_all)
        in_b[nodes_b] = False
        assert t_b is not None
        t_all[nodes_b] = t_b
        rounds += r
    return win, t_all[win], rounds


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
    outer = np.setdiff1d(g.src[e_in][~in_b[g.src[e_in]]], preds)
    nodes = np.concatenate([nodes_b, preds, outer])
    key = np.concatenate([g.chain[nodes_b], g.chain[preds], -1 - np.arange(len(outer))])
    order = np.lexsort((nodes, key))
    nodes, key = nodes[order], key[order]
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
    return t[~frozen][np.argsort(nodes[~frozen])], rounds


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
    that none sees its predecessor's maximum."""
    if not len(ext):
        return ext.copy()
    x = ext - prefix
    finite = ext > NEG // 2
    base = int(x[finite].min()) if finite.any() else 0
    x = np.where(finite, x - base, -1)
    x = np.maximum(x, -1)
    span = int(x.max()) + 2
    if span * (int(chain_rank[-1]) + 1) >= 2**62:
        raise OverflowError("replay: trace too long for the int64 scan")
    off = chain_rank * span
    m = np.maximum.accumulate(x + off) - off
    return np.where(m < 0, NEG, prefix + m + base)
