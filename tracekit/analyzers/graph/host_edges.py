"""Host threads of the dependency graph: pieces (each thread cut at its ops' boundaries, attributed to the innermost
op; gaps are host time), and what the host waits for: synchronisations and blocked calls (device work), gloo waits
and issues (worker spans), stream waits between device streams. Vectorised: sorts and searches, no loop per event."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...model.events import EventKind
from .. import intervals as iv
from .structure import (
    AUTOGRAD_OP,
    BLOCKED_NS,
    BLOCKING_CALLS,
    COMPUTE,
    HOST,
    HOST_CHAIN,
    HOST_SYNC_CALLS,
    ISSUE,
    NEG,
    STREAM_WAIT,
)


def host_syncs(t, ts, end, host_rows, d_rows, d_end_ids):
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
    idle = (dep >= 0) & ~waited & ~is_long & calls[np.where(t["name_id"][sync_rows] < 0, len(t.strings), t["name_id"][sync_rows])]
    lane, dur = t["stream"][sync_rows], (end - ts)[sync_rows]
    to, at, ln, nat = [d_end_ids[dep[idle]]], [end[sync_rows][idle]], [lane[idle]], [dur[idle]]
    # a device sync waits for every stream: the latest activity of each other stream is an input too
    device_wide = (stream < 0) & ~is_long & calls[np.where(t["name_id"][sync_rows] < 0, len(t.strings), t["name_id"][sync_rows])]
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
        B = iv.key_stride(len(ug), lo, values.max(), limits.max())
        order = np.lexsort((values, gcode))
        keys = (gcode * B + (values - lo))[order]
        q = want_group[~anyg]
        qc = np.searchsorted(ug, q)
        known = (qc < len(ug)) & (ug[np.minimum(qc, len(ug) - 1)] == q)
        pos = np.searchsorted(keys, qc * B + (limits[~anyg] - lo), side="right") - 1
        hit = known & (pos >= 0) & (gcode[order[np.maximum(pos, 0)]] == qc)
        out[~anyg] = np.where(hit, order[np.maximum(pos, 0)], -1)
    return out


def gloo_waits(t, ts, end, host_rows, d_rows, t_ids):
    """((worker-span transfer node, cut, thread, wait row) of each tracekit wait annotation (a host SYNC carrying a
    process group and Seq) whose gloo span ended after it began (cut where the span ended, or at the wait's end
    if the span's record closes later), and (span, wait end, thread, 0) of those whose span had ended before:
    they would wait for a slower span)."""
    empty = (np.empty(0, np.int64),) * 4
    waits = host_rows[(t["kind"][host_rows] == EventKind.SYNC) & (t["seq"][host_rows] >= 0)]
    spans = d_rows[(t_ids >= 0) & (t["device"][d_rows] < 0) & (t["seq"][d_rows] >= 0)]
    if not len(waits) or not len(spans):
        return empty, empty
    t_of_span = lookup(d_rows, t_ids, spans)
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


def lookup(keys, values, wanted):
    s = pd.Series(values, index=keys)
    return s.reindex(wanted).fillna(-1).to_numpy(np.int64)


def gloo_issues(parts, t, host_rows, worker_rows, d_rows, d_ids, w_ids, pid, pstart, plane, ts):
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
    src = piece_at(pid, pstart, plane, t["stream"][irow], ts[irow])
    dst = lookup(d_rows, w_ids, spans[ok])
    keep = (src >= 0) & (dst >= 0)
    parts.add_edges(src[keep], dst[keep], False, 0, ISSUE)


def stream_waits(parts, t, ts, end, d_rows, d_ids, d_end_ids):
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
    B = iv.key_stride(len(ug), lo, dend.max(), dstart.max())
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
    B = iv.key_stride(len(ul), lo, starts.max(), q_times.max())
    order = np.lexsort((starts, code))
    keys = (code * B + (starts - lo))[order]
    qc = np.searchsorted(ul, q_lanes)
    known = (qc < len(ul)) & (ul[np.minimum(qc, len(ul) - 1)] == q_lanes)
    pos = np.searchsorted(keys, qc * B + (q_times - lo), side="left")
    inside = known & (pos < len(keys))
    hit = inside & (code[order[np.minimum(pos, len(keys) - 1)]] == qc)
    return np.where(hit, order[np.minimum(pos, len(keys) - 1)], -1)


def autograd_waits(t, ts, end, host_rows):
    """(waiting thread, gap start, resume cut, engine thread, first op start) for each stretch in which the thread
    of the step windows has no op boundary (it sits in ``loss.backward()``, or in a bare step annotation) while the
    autograd engine's own thread (one that runs ``autograd::engine::evaluate_function`` ops; on GPUs PyTorch runs
    backward there) runs ops: the backward starts after the call and the caller resumes once its last op has
    ended. Without these, the caller's wait is a host gap of fixed length and the path never leaves it (a DDP
    step read "100 % host" on the main thread)."""
    empty = (np.empty(0, np.int64),) * 5
    lane, kind = t["stream"][host_rows], t["kind"][host_rows]
    step_lanes = np.unique(lane[kind == EventKind.STEP])
    is_engine = np.array([s.startswith(AUTOGRAD_OP) for s in t.strings] + [False], bool)
    nid = t["name_id"][host_rows]
    engine_op = is_engine[np.where(nid < 0, len(t.strings), nid)]
    engine_lanes = np.setdiff1d(np.unique(lane[engine_op]), step_lanes)
    if not len(step_lanes) or not len(engine_lanes):
        return empty
    out = []
    for a in step_lanes.tolist():
        on_a = host_rows[lane == a]
        bounds = sorted_unique(np.concatenate([ts[on_a], end[on_a]]))
        for b in engine_lanes.tolist():
            on_b = lane == b
            s_b, e_b, eng = ts[host_rows[on_b]], end[host_rows[on_b]], engine_op[on_b]
            i = np.searchsorted(bounds, s_b, side="right") - 1  # the caller's last boundary at or before the op
            ok = (i >= 0) & (i + 1 < len(bounds))
            ok[ok] &= e_b[ok] <= bounds[i[ok] + 1]  # the op lies inside one of the caller's gaps
            gaps, g = np.unique(i[ok], return_inverse=True)
            if not len(gaps):
                continue
            first, last = np.full(len(gaps), np.iinfo(np.int64).max), np.zeros(len(gaps), np.int64)
            np.minimum.at(first, g, s_b[ok])
            np.maximum.at(last, g, e_b[ok])
            has_engine = np.bincount(g, weights=eng[ok], minlength=len(gaps)) > 0
            k = len(gaps[has_engine])
            out.append((np.full(k, a), bounds[gaps][has_engine], last[has_engine], np.full(k, b), first[has_engine]))
    if not out:
        return empty
    return tuple(np.concatenate(x).astype(np.int64) for x in zip(*out))


def pieces(parts, r, t, ts, end, host_rows, cuts, cut_lane, call_rows, device_type, waits=None):
    """Cut every host thread at its ops' boundaries (and at ``cuts``: first those of the synchronising
    ``call_rows``, one each, then any others); attribute each piece to its innermost op. ``waits``: (thread, from,
    to) stretches in which a thread waits (its pieces there have no own duration). Returns (piece ids, piece
    starts, piece threads), sorted by (thread, start)."""
    lanes_all = t["stream"][host_rows]
    lanes, lcode = np.unique(lanes_all, return_inverse=True)
    if not len(host_rows):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    s, e = ts[host_rows], end[host_rows]
    lo = int(min(s.min(), cuts.min() if len(cuts) else s.min()))
    B = iv.key_stride(len(lanes), lo, e.max(), s.max(), cuts.max() if len(cuts) else lo)
    rel_s, rel_e = s - lo, e - lo
    cut_code = np.searchsorted(lanes, cut_lane)
    okc = (cut_code < len(lanes)) & (lanes[np.minimum(cut_code, len(lanes) - 1)] == cut_lane) if len(cuts) else np.zeros(0, bool)
    bkeys = sorted_unique(np.concatenate([lcode * B + rel_s, lcode * B + rel_e, cut_code[okc] * B + (cuts[okc] - lo)]))
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
    L = np.int64(max(int(level.max()), int(depth.max()) if len(depth) else 0, 0) + 1)  # nesting levels
    iv.key_stride((len(lanes) + 1) * int(L), 0, int(B) - 1)  # (lane, level, time) keys fit in int64 too
    lkeys = (lcode * L + np.minimum(level, L - 1)) * B + rel_s
    lorder = np.argsort(lkeys, kind="stable")
    q = (p_lane * L + np.minimum(depth, L - 1)) * B + p_s
    at = np.searchsorted(lkeys[lorder], q, side="right") - 1
    inner = np.where((depth > 0) & (at >= 0), host_rows[lorder[np.maximum(at, 0)]], -1)
    # keep pieces inside the thread's span only (consecutive boundaries always are)
    kind = _piece_kind(t, inner, device_type)
    dur = p_e - p_s
    # waiting pieces: inside a host sync, before the cut
    dur = np.where(_waiting(inner, p_s + lo, call_rows, cuts[: len(call_rows)]), 0, dur)
    if waits is not None and len(waits[0]):
        dur = np.where(_inside_spans(lanes[p_lane], p_s + lo, *waits), 0, dur)
    c0 = parts.add_chains(HOST_CHAIN, r, lanes)
    ids = parts.add_nodes(
        chain=c0 + p_lane,
        start=p_s + lo,
        dur=dur,
        kind=kind,
        rank=np.full(len(p_s), r),
        row=inner,
        dimension=np.full(len(p_s), "", object),
        step=np.full(len(p_s), -1, np.int64),
    )
    return ids, p_s + lo, lanes[p_lane]


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """np.unique(x) by a sort and a neighbour comparison: numpy 2.4's np.unique hashes first, ~100x slower on
    hundreds of thousands of mostly distinct int64 keys (the boundaries of every host op)."""
    s = np.sort(x)
    keep = np.ones(len(s), bool)
    keep[1:] = s[1:] != s[:-1]
    return s[keep]


def _inside_spans(p_lane, p_start, w_lane, w_lo, w_hi):
    """Pieces that start inside one of the (thread, from, to) stretches (disjoint per thread)."""
    out = np.zeros(len(p_start), bool)
    for lane in np.unique(w_lane).tolist():
        on = w_lane == lane
        order = np.argsort(w_lo[on])
        lo, hi = w_lo[on][order], w_hi[on][order]
        at = np.flatnonzero(p_lane == lane)
        pos = np.searchsorted(lo, p_start[at], side="right") - 1
        out[at] = (pos >= 0) & (p_start[at] < hi[np.maximum(pos, 0)])
    return out


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


def piece_at(pid, pstart, plane, lanes, times):
    """The piece of thread ``lanes`` that contains ``times`` (-1 where none)."""
    if not len(pid):
        return np.full(len(times), -1, np.int64)
    ul, code = np.unique(plane, return_inverse=True)
    base = int(min(pstart.min(), np.min(times) if len(times) else pstart.min()))
    B = iv.key_stride(len(ul), base, pstart.max(), np.max(times) if len(times) else base)
    keys = code * B + (pstart - base)
    lc = np.searchsorted(ul, lanes)
    okl = (lc < len(ul)) & (ul[np.minimum(lc, len(ul) - 1)] == lanes)
    q = lc * B + (np.asarray(times) - base)
    pos = np.searchsorted(keys, q, side="right") - 1
    ok = okl & (pos >= 0) & (code[np.maximum(pos, 0)] == lc)
    return np.where(ok, pid[np.maximum(pos, 0)], -1)
