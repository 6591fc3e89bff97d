"""Which input bound each node of the dependency graph, from evidence: the input whose own finish is latest and
closest to the node's measured start.

A node's inputs are the previous node of its chain (finish: that node's end) and its edges (finish: the source's
start or end plus the edge's natural delay: 0, or the rank's smallest launch latency). The input that bound the
node is the one that finished latest, no later than ``TOLERANCE_NS`` after the node started (clocks and rounding);
the chain wins a tie (a device stream that was busy until then). What is left between that finish and the node's
start is the node's *residual*: it stays on the binding input (so a replay keeps the trace's launch latencies and
kernel-to-kernel gaps), and it is reported: a residual larger than the tolerance is time that no recorded
dependency accounts for (``unexplained`` on the critical path).

The other inputs keep their natural delay, not clipped to the measured start: an input that the trace shows
finishing later than the node started (by more than the tolerance) contradicts the graph, and the identity replay
then moves that node and reports an error. So the identity replay checks the graph instead of reproducing it by
construction.
"""

from __future__ import annotations

import numpy as np

from .structure import NEG, TOLERANCE_NS


def residuals(chain, start, dur, src, dst, anchor_end, natural, tol: int = TOLERANCE_NS):
    """(gap, delay, resid, fixed, bind): the chain edge's gap into each node (its residual where the chain bound it,
    else the measured overlap, never positive), each edge's delay (natural + residual where it bound), each edge's
    residual (0 where it did not bind), the fixed start of a chain's first node without any input, and what bound
    each node (-1 its chain, -2 nothing: a fixed start or no input finished in time, else the edge)."""
    n = len(chain)
    first = np.ones(n, bool)
    first[1:] = chain[1:] != chain[:-1]
    prev_end = np.empty(n, np.int64)
    prev_end[1:] = start[:-1] + dur[:-1]
    prev_end[0] = NEG
    chain_fin = np.where(first, NEG, np.minimum(prev_end, start))  # an overlap on a stream is measured structure
    anchor = start[src] + np.where(anchor_end, dur[src], 0)
    fin = anchor + natural
    admissible = fin <= start[dst] + tol
    best = np.full(n, NEG, np.int64)
    np.maximum.at(best, dst[admissible], fin[admissible])
    edge_binds = admissible & (fin == best[dst]) & (fin > chain_fin[dst])
    eb = np.flatnonzero(edge_binds)
    _, firsts = np.unique(dst[eb], return_index=True)  # one binding edge per node: the first of the latest
    bind = np.zeros(len(src), bool)
    bind[eb[firsts]] = True
    resid = np.where(bind, start[dst] - fin, 0)
    delay = natural + resid
    by_edge = np.zeros(n, bool)
    by_edge[dst[bind]] = True
    gap = np.where(first | by_edge, np.minimum(0, start - prev_end), start - prev_end)
    gap = np.where(first, 0, gap)
    has_input = np.zeros(n, bool)
    has_input[dst] = True
    fixed = np.where(first & ~has_input, start, NEG)  # where a chain starts unprompted (the trace's beginning)
    bound = np.where(first, -2, -1).astype(np.int64)
    bound[dst[bind]] = np.flatnonzero(bind)
    return gap.astype(np.int64), delay.astype(np.int64), resid.astype(np.int64), fixed.astype(np.int64), bound
