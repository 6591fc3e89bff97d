"""The host waiting for the device where the trace records no synchronisation call, inferred from evidence.

Besides the sync calls and blocked launches of host_edges.host_syncs, a host thread waits for the device

- in a scalar read (``aten::item``, ``aten::_local_scalar_dense``: the value is copied back and the thread waits
  for it) and in the caching allocator's ``cudaFree``/``cudaMalloc`` (``hip...``), which synchronise the device:
  when a device activity ended inside the call and the call returned within BLOCKED_NS of it;
- in a gap with no op at all (no op but annotations and the step window itself: a Python spin on pinned memory,
  as expert-parallel dispatch does, or a call the profiler did not record): a gap of BLOCKED_NS or more during
  which the device was busy (at least BUSY_SHARE of it) and which ends within TOLERANCE_NS of a device activity's
  end.

Either way the host piece from where the activity ended waits for it (a SYNC edge, with the rule in the graph's
``rule`` column), and the time before that is waiting, not host work. A gap while the device is busy that ends
when a device activity does is the host waiting for the device: left as host time it was most of the path of a
GPU-bound step (issue 26). Vectorised: one sort of the device ends, searches for all the gaps.
"""

from __future__ import annotations

import re

import numpy as np

from ...model.events import EventKind
from .. import intervals as iv
from .structure import BLOCKED_NS, NEG, TOLERANCE_NS

BUSY_SHARE = 0.9  # a gap during which the device is busy at least this share of the time
SCALAR_OPS = ("aten::item", "aten::_local_scalar_dense")
ALLOCATOR_CALLS = re.compile(r"^(cuda|hip)(Free|Malloc)$")
_EMPTY = (np.empty(0, np.int64),) * 4


def call_waits(t, ts, end, host_rows, d_rows, d_end_ids):
    """((device node, cut, thread, call row) of the scalar reads, (the same) of the allocator calls) that waited for
    a device activity: the latest one of any stream that ended inside the call, the call returning within
    BLOCKED_NS of its end."""
    scalar = np.array([s in SCALAR_OPS for s in t.strings] + [False], bool)
    alloc = np.array([bool(ALLOCATOR_CALLS.match(s)) for s in t.strings] + [False], bool)
    nid = t["name_id"][host_rows]
    code = np.where(nid < 0, len(t.strings), nid)
    out = []
    for names in (scalar, alloc):
        rows = host_rows[names[code]]
        if not len(rows) or not len(d_rows):
            out.append(_EMPTY)
            continue
        order = np.argsort(end[d_rows], kind="stable")
        d_end = end[d_rows][order]
        pos = np.searchsorted(d_end, end[rows], side="right") - 1
        dep = np.where(pos >= 0, order[np.maximum(pos, 0)], -1)
        dep_end = np.where(dep >= 0, end[d_rows][np.maximum(dep, 0)], NEG)
        ok = (dep >= 0) & (dep_end > ts[rows]) & (end[rows] - dep_end <= BLOCKED_NS)
        out.append((d_end_ids[dep[ok]], dep_end[ok], t["stream"][rows][ok], rows[ok]))
    return tuple(out)


def gap_waits(t, ts, end, host_rows, d_rows, d_end_ids, exclude=None):
    """(device node, cut, thread, gap start) of each gap of a host thread (no op but annotations covers it) of BLOCKED_NS or more
    during which the device was busy at least BUSY_SHARE of the time and which ends within TOLERANCE_NS of a
    device activity's end (the latest such end at or before the gap's end, else the earliest after it). The cut
    is that end, or the gap's end when the activity ended after it. ``exclude``: (thread, from, to) stretches
    already explained (the autograd engine's hand-over): gaps that overlap one are left alone."""
    work = host_rows[~t.mask_kind(EventKind.ANNOTATION, EventKind.STEP)[host_rows]]  # annotations do no work
    if not len(work) or not len(d_rows):
        return _EMPTY
    lanes, lcode = np.unique(t["stream"][work], return_inverse=True)
    s, e = ts[work], end[work]
    lo = int(min(s.min(), end[d_rows].min(), ts[d_rows].min()))
    B = iv.key_stride(len(lanes), lo, int(e.max()), int(end[d_rows].max()))
    cov_s, cov_e = iv.union(lcode * B + (s - lo), lcode * B + (e - lo))
    same = cov_s[1:] // B == cov_e[:-1] // B
    g_lane = lanes[(cov_e[:-1] // B)[same]]
    g_from, g_to = (cov_e[:-1] % B)[same] + lo, (cov_s[1:] % B)[same] + lo
    long = g_to - g_from >= BLOCKED_NS
    g_lane, g_from, g_to = g_lane[long], g_from[long], g_to[long]
    if exclude is not None and len(exclude[0]) and len(g_lane):
        g_lane, g_from, g_to = _not_overlapping(g_lane, g_from, g_to, *exclude)
    if not len(g_lane):
        return _EMPTY
    busy = iv.union(ts[d_rows], end[d_rows])
    busy_share = iv.length_in_windows(busy, g_from, g_to) / (g_to - g_from)
    order = np.argsort(end[d_rows], kind="stable")
    d_end = end[d_rows][order]
    before = np.searchsorted(d_end, g_to, side="right") - 1
    after = np.minimum(before + 1, len(d_end) - 1)
    use_before = (before >= 0) & (g_to - d_end[np.maximum(before, 0)] <= TOLERANCE_NS)
    use_after = ~use_before & (d_end[after] > g_to) & (d_end[after] - g_to <= TOLERANCE_NS)
    pick = np.where(use_before, np.maximum(before, 0), after)
    dep_end = d_end[pick]
    ok = (use_before | use_after) & (busy_share >= BUSY_SHARE) & (dep_end > g_from)
    dep = order[pick[ok]]
    return d_end_ids[dep], np.minimum(dep_end[ok], g_to[ok]), g_lane[ok], g_from[ok]


def _not_overlapping(lane, lo, hi, x_lane, x_lo, x_hi):
    """The (lane, lo, hi) gaps that overlap none of the (x_lane, x_lo, x_hi) stretches."""
    keep = np.ones(len(lane), bool)
    for ln in np.unique(x_lane).tolist():
        on = np.flatnonzero(lane == ln)
        if not len(on):
            continue
        xs = x_lane == ln
        order = np.argsort(x_lo[xs])
        a, b = x_lo[xs][order], np.maximum.accumulate(x_hi[xs][order])
        pos = np.searchsorted(a, hi[on], side="left") - 1  # the last stretch starting before the gap ends
        keep[on] = ~((pos >= 0) & (b[np.maximum(pos, 0)] > lo[on]))
    return lane[keep], lo[keep], hi[keep]
