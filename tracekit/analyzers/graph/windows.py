"""The step windows of the dependency graph: the windows the analysis measured (tracekit.analyzers.comm.steps), so
that the path of a step explains the time the summary reports.

A rank's step runs from its device span's start to its end (``StepPlan.span_start`` .. ``StepPlan.end``: the
summary's ``wall_us``), not to the end of its host window: on a GPU-bound step the host finishes early and the
device runs on, and the step is over when the device is. A trace without ProfilerStep is one window, as in the
analysis (from its first event to its last).

The step ends at the latest of its *end nodes*: the host piece at the host window's end and, on each device stream,
the last activity the step launched (its ``step`` in the analysed table). A replay takes the latest of them again,
so that halving the kernels of the stream that ended last lets another stream end the step. Where no node ends at
the window's end (an event that is no node, such as a device-side sync record), the rest is a tail.
"""

from __future__ import annotations

import numpy as np

from .structure import HOST_CHAIN, Window


def plan_windows(plan, shift: int) -> tuple[np.ndarray, ...]:
    """(step ids, starts, host ends, ends, complete) of a rank's StepPlan, on the graph's clock."""
    ids = np.asarray(plan.ids, np.int64)
    start = np.asarray(plan.span_start, np.int64) - shift
    host_end = np.asarray(plan.host_end, np.int64) - shift
    end = np.asarray(plan.end, np.int64) - shift
    complete = np.asarray(plan.complete, bool) if len(ids) else np.zeros(0, bool)
    return ids, start, host_end, end, complete


def window_nodes(rank_windows, rank, start, dur, chain_type, chain, step) -> tuple[Window, ...]:
    """The Windows of every rank, with their end nodes (final, chain-sorted node ids)."""
    end = start + dur
    ct = chain_type[chain]
    host_end = _host_end_nodes(rank, end, ct)
    last = _last_of_step(rank, chain, ct, step)
    out = []
    for r, ids, w_start, w_host_end, w_end, complete in rank_windows:
        for s, a, h, b, c in zip(ids.tolist(), w_start.tolist(), w_host_end.tolist(), w_end.tolist(), complete.tolist()):
            nodes = [n for n in (host_end(r, h),) if n >= 0] + last.get((r, s), [])
            if not nodes:  # nothing of the rank ends inside the window's reach: no path to walk
                continue
            latest = max(int(end[n]) for n in nodes)
            best = max(nodes, key=lambda n: (int(end[n]), ct[n] != HOST_CHAIN, n))
            out.append(Window(int(s), int(r), int(best), int(a), int(b), max(int(b) - latest, 0), bool(c), tuple(nodes)))
    return tuple(out)


def _host_end_nodes(rank, end, chain_type):
    """A lookup (rank, time) -> the rank's host node that ends latest at or before the time (-1 for none)."""
    host = np.flatnonzero((chain_type == HOST_CHAIN) & (rank >= 0))
    order = host[np.lexsort((host, end[host], rank[host]))]
    r_sorted, e_sorted = rank[order], end[order]

    def find(r: int, t: int) -> int:
        lo, hi = np.searchsorted(r_sorted, r, "left"), np.searchsorted(r_sorted, r, "right")
        pos = int(np.searchsorted(e_sorted[lo:hi], t, side="right")) - 1
        return int(order[lo + pos]) if pos >= 0 else -1

    return find


def _last_of_step(rank, chain, chain_type, step) -> dict[tuple[int, int], list[int]]:
    """(rank, step) -> the last node of that step on each device chain (nodes are sorted by chain, then time)."""
    dev = np.flatnonzero((chain_type != HOST_CHAIN) & (rank >= 0))
    if not len(dev):
        return {}
    order = dev[np.lexsort((dev, chain[dev], step[dev], rank[dev]))]
    key_change = np.ones(len(order), bool)
    key_change[:-1] = (rank[order][1:] != rank[order][:-1]) | (step[order][1:] != step[order][:-1])
    key_change[:-1] |= chain[order][1:] != chain[order][:-1]
    out: dict[tuple[int, int], list[int]] = {}
    for n in order[key_change].tolist():
        out.setdefault((int(rank[n]), int(step[n])), []).append(int(n))
    return out
