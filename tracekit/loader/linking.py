"""Filling the collective columns: from kernel args, from the host op that launched a kernel, and from
tracekit's own annotations for gloo spans on CPU runs."""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from ..formats import comm_annotation
from ..model.events import ABSENT
from ..model.events import EventKind as K
from .classify import dtype_bytes, normalize_op

_STR_FIELDS = ("coll_op_id", "pg_name_id", "pg_desc_id", "pg_ranks_id", "dtype_id", "in_split_id", "out_split_id")
_INT_FIELDS = ("group_size", "in_nelems", "out_nelems", "in_bytes", "out_bytes", "seq", "src_rank", "dst_rank")
_FIELDS = _STR_FIELDS + _INT_FIELDS


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


_INT_LIMIT = 2**53  # sizes, counts and sequence numbers beyond this are corrupt (and overflow bytes = n * size)
_INT32_FIELDS = ("group_size", "src_rank", "dst_rank")


def _int(value) -> int:
    """A non-negative count from an arg (int, or its decimal text); absent (-1) when missing, malformed,
    non-finite or beyond 2**53."""
    try:
        v = int(value) if value is not None and value != "" and not isinstance(value, bool) else ABSENT
    except (TypeError, ValueError, OverflowError):
        return ABSENT
    return v if -1 <= v < _INT_LIMIT else ABSENT


def fill_collectives(cols, strings: dict[str, int], coll_args: dict, names: list[str], name_codes) -> None:
    """``coll_args``: row -> Args for the rows whose args carry collective metadata, in row order."""
    def sid(text: str | None) -> int:
        return ABSENT if not text else strings.setdefault(text, len(strings))

    def put(i: int, *, op=None, pg_name=None, pg_desc=None, ranks=None, dtype=None, in_split=None,
            out_split=None, **ints) -> None:
        for key, value in (("coll_op_id", op), ("pg_name_id", pg_name), ("pg_desc_id", pg_desc),
                           ("pg_ranks_id", ranks), ("dtype_id", dtype), ("in_split_id", in_split),
                           ("out_split_id", out_split)):
            if value:
                cols[key][i] = sid(value)
        for key, value in ints.items():
            if value is not None and 0 <= value < (2**31 if key in _INT32_FIELDS else _INT_LIMIT):
                cols[key][i] = value

    kind = cols["kind"]
    # 1. collective args on kernels and on record_param_comms (NCCL traces)
    for i, a in coll_args.items():
        put(i, op=normalize_op(a.coll_name), pg_name=_text(a.pg_name if a.pg_name is not None else a.pg_id),
            pg_desc=a.pg_desc, ranks=_text(a.pg_ranks), dtype=a.dtype, in_split=_text(a.in_split),
            out_split=_text(a.out_split), group_size=_int(a.group_size),
            in_nelems=_int(a.in_nelems if a.in_nelems is not None else a.in_size),
            out_nelems=_int(a.out_nelems if a.out_nelems is not None else a.out_size),
            seq=_int(a.seq), src_rank=_int(a.src_rank), dst_rank=_int(a.dst_rank))
    # 2. tracekit's own annotations (gloo runs)
    tk_rows = np.flatnonzero(((kind == K.CPU_COMM_OP) | (kind == K.SYNC)) & (cols["device"] < 0))
    parsed: dict[int, comm_annotation.CommAnnotation] = {}
    for i in tk_rows:
        ann = comm_annotation.parse(names[name_codes[i]])
        if ann is None:
            continue
        parsed[int(i)] = ann
        put(int(i), op=normalize_op(ann.op) or ann.op, pg_name=ann.pg_name, pg_desc=ann.pg_desc,
            ranks=f"[{', '.join(ann.ranks.split(','))}]" if ann.ranks else None, dtype=ann.dtype,
            in_split=ann.in_split, out_split=ann.out_split, in_nelems=ann.in_nelems, out_nelems=ann.out_nelems,
            in_bytes=ann.in_bytes, out_bytes=ann.out_bytes, seq=ann.seq, src_rank=ann.src_rank,
            dst_rank=ann.dst_rank, group_size=len(ann.ranks_tuple) or None)
    _link_device_kernels(cols)
    # 3. op from the name where nothing better is known (gloo spans: their own op, then the annotation's rest)
    comm = np.flatnonzero((kind == K.COMM) & (cols["coll_op_id"] < 0))
    for i in comm:
        op = normalize_op(names[name_codes[i]].replace("gloo:", ""))
        if op:
            cols["coll_op_id"][i] = sid(op)
    _link_gloo_spans(cols, parsed, strings)
    _fill_bytes(cols, strings)


def _copy(cols, dst: np.ndarray, src: np.ndarray) -> None:
    for key in _FIELDS:
        col = cols[key]
        take = col[dst] < 0
        col[dst[take]] = col[src[take]]


def _link_device_kernels(cols) -> None:
    """Comm kernels without args take them from the host collective op that launched them: the
    record_param_comms (or c10d/nccl op) enclosing the launch call on the same thread."""
    kind = cols["kind"]
    need = np.flatnonzero((kind == K.COMM) & (cols["device"] >= 0) & (cols["coll_op_id"] < 0)
                          & (cols["correlation"] >= 0))
    hosts = np.flatnonzero((kind == K.CPU_COMM_OP) & ((cols["coll_op_id"] >= 0) | (cols["in_nelems"] >= 0)))
    rt = np.flatnonzero((kind == K.RUNTIME) & (cols["correlation"] >= 0))
    if not (len(need) and len(hosts) and len(rt)):
        return
    o = np.argsort(cols["correlation"][rt], kind="stable")
    rt = rt[o]
    pos = np.clip(np.searchsorted(cols["correlation"][rt], cols["correlation"][need]), 0, len(rt) - 1)
    hit = cols["correlation"][rt[pos]] == cols["correlation"][need]
    need, launch = need[hit], rt[pos[hit]]
    ts, end, tid = cols["ts_ns"], cols["ts_ns"] + cols["dur_ns"], cols["stream"]
    for thread in np.unique(tid[launch]):
        h = hosts[tid[hosts] == thread]
        if not len(h):
            continue
        h = h[np.argsort(ts[h], kind="stable")]
        sel = tid[launch] == thread
        k, lrows = need[sel], launch[sel]
        idx = np.searchsorted(ts[h], ts[lrows], side="right") - 1
        ok = idx >= 0
        ok[ok] = end[h[idx[ok]]] >= ts[lrows[ok]]
        _copy(cols, k[ok], h[idx[ok]])


# gloo carries some collectives out as another op: reduce_scatter as an all_reduce plus a slice, a ring exchange
# written as all_to_all_single as an all_to_all. A span may answer an annotation of any op in its class.
_SPAN_OPS = {"reduce_scatter": ("reduce_scatter", "all_reduce"), "send_recv": ("all_to_all", "send", "recv"),
             "send": ("send", "all_to_all"), "recv": ("recv", "all_to_all"), "all_gather": ("all_gather",),
             "gather": ("gather", "all_gather"), "scatter": ("scatter", "all_to_all")}


def _link_gloo_spans(cols, parsed: dict, strings: dict[str, int]) -> None:
    """A gloo span on a worker thread takes the metadata of the tracekit:comm annotation that issued it.

    gloo runs each process group's work in issue order on that group's own worker threads, so a span answers
    the oldest pending annotation (issued before the span starts, op compatible) of its thread's group. The
    thread -> group map is learnt first from the spans only one group can explain (a whole pass, so that a
    thread's later unambiguous spans settle its earlier ambiguous ones), then used for the real matching: an sp
    reduce-scatter runs as gloo:all_reduce while a dp all-reduce may be pending."""
    kind = cols["kind"]
    spans = np.flatnonzero((kind == K.COMM) & (cols["device"] < 0))
    issues = sorted((i for i, a in parsed.items() if not a.is_wait), key=lambda i: cols["ts_ns"][i])
    if not len(spans) or not issues:
        return
    spans = spans[np.argsort(cols["ts_ns"][spans], kind="stable")]
    callers = {int(cols["stream"][i]) for i in parsed}  # threads that issue work serve every group: never mapped
    learnt = _match_spans(cols, parsed, strings, spans, issues, {}, callers)[1]
    links = _match_spans(cols, parsed, strings, spans, issues, learnt, callers)[0]
    for s, src in links:
        _copy(cols, np.array([s]), np.array([src]))
        cols["coll_op_id"][s] = cols["coll_op_id"][src]  # the collective's own op, not gloo's way of doing it
        cols["step"][s] = cols["step"][src]


def _match_spans(cols, parsed, strings, spans, issues, thread_group: dict, callers: set):
    """One greedy pass in span start order: (links, thread -> group learnt from unambiguous spans)."""
    text = {v: k for k, v in strings.items()}
    pending: dict[str, deque] = defaultdict(deque)  # process group -> annotations in issue order
    for i in issues:
        pending[parsed[i].pg_name].append(i)
    links, learnt = [], {}
    for s in spans:
        span_op = text.get(int(cols["coll_op_id"][s]), "")
        start = cols["ts_ns"][s]
        heads = {pg: q[0] for pg, q in pending.items() if q and cols["ts_ns"][q[0]] <= start
                 and span_op in _SPAN_OPS.get(parsed[q[0]].op, (parsed[q[0]].op,))}
        thread = int(cols["stream"][s])
        pg = thread_group.get(thread, learnt.get(thread))
        if pg not in heads:
            exact = [g for g, i in heads.items() if parsed[i].op == span_op]
            choices = exact or list(heads)
            if not choices:
                continue
            pg = min(choices, key=lambda g: cols["ts_ns"][heads[g]])
            if len(heads) == 1 and thread not in callers:
                learnt.setdefault(thread, pg)
        links.append((s, pending[pg].popleft()))
    return links, learnt


def _fill_bytes(cols, strings: dict[str, int]) -> None:
    lookup = {sid: dtype_bytes(text) for text, sid in strings.items()}
    rows = np.flatnonzero((cols["dtype_id"] >= 0) & ((cols["in_nelems"] >= 0) | (cols["out_nelems"] >= 0)))
    for i in rows:
        size = lookup.get(int(cols["dtype_id"][i]), -1)
        if size < 0:
            continue
        for n_key, b_key in (("in_nelems", "in_bytes"), ("out_nelems", "out_bytes")):
            if cols[b_key][i] < 0 and 0 <= cols[n_key][i] < _INT_LIMIT // 16:  # no int64 wrap-around
                cols[b_key][i] = cols[n_key][i] * size
