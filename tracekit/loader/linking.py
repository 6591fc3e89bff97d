"""Communication from evidence, and the collective columns.

Which device work is communication, in order of evidence: collective metadata on the kernel (or on its linked
``record_param_comms``); then the launch context -- a kernel or memcpy launched from directly inside a
collective host op (NCCL's copy-engine collectives and symmetric-memory all-gathers run as a Memcpy with no
kernel); then the shipped name rules (classify.py). The collective columns come from kernel args, from the host
op that launched a kernel (its args, or its name and ``Input Dims``/``Input type`` in traces before 2024), and
from tracekit's own annotations for gloo spans on CPU runs."""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from ..formats import comm_annotation
from ..model.events import ABSENT
from ..model.events import EventKind as K
from .classify import HOST_COMM_OP, RuleSet, dtype_bytes, normalize_op

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


def _issuer_names(names: list[str]) -> np.ndarray:
    """Per unique name: a host op that issues a device collective (c10d::*, record_param_comms, nccl:*, ...;
    not gloo, which runs no device work, nor a wait)."""
    return np.array(
        [HOST_COMM_OP.match(n) is not None and not n.startswith("gloo:") and "wait" not in n for n in names] or [False],
        dtype=bool,
    )


def comm_from_launch_context(cols, names: list[str], name_codes: np.ndarray) -> int:
    """Device kernels and memcpys launched from directly inside a collective host op become COMM (the
    innermost host op enclosing the launch call is the collective's, not an operator such as ``aten::copy_``
    nested in it). Returns how many were reclassified."""
    kind, corr = cols["kind"], cols["correlation"]
    cand = np.flatnonzero(((kind == K.KERNEL) | (kind == K.MEMCPY)) & (cols["device"] >= 0) & (corr >= 0))
    issuer = _issuer_names(names)[name_codes] & (kind == K.CPU_COMM_OP) & (cols["device"] < 0)
    hosts = np.flatnonzero(issuer)
    rt = np.flatnonzero((kind == K.RUNTIME) & (corr >= 0))
    if not (len(cand) and len(hosts) and len(rt)):
        return 0
    rt = rt[np.argsort(corr[rt], kind="stable")]
    pos = np.clip(np.searchsorted(corr[rt], corr[cand]), 0, len(rt) - 1)
    hit = corr[rt[pos]] == corr[cand]
    cand, launch = cand[hit], rt[pos[hit]]
    ts, end, tid = cols["ts_ns"], cols["ts_ns"] + cols["dur_ns"], cols["stream"]
    ops = np.flatnonzero(((kind == K.CPU_OP) | (kind == K.CPU_COMM_OP)) & ~issuer & (cols["device"] < 0))
    changed = 0
    for thread in np.unique(tid[launch]):
        h = hosts[tid[hosts] == thread]
        if not len(h):
            continue
        h = h[np.argsort(ts[h], kind="stable")]
        sel = np.flatnonzero(tid[launch] == thread)
        t = ts[launch[sel]]
        # inside the union of the thread's collective ops? (vectorised; the few hits are checked one by one)
        idx = np.searchsorted(ts[h], t, side="right") - 1
        reach = np.maximum.accumulate(end[h])
        inside = idx >= 0
        inside[inside] = reach[idx[inside]] >= t[inside]
        o = ops[tid[ops] == thread]
        o = o[np.argsort(ts[o], kind="stable")]
        o_ts, o_end = ts[o], end[o]
        h_end = end[h].tolist()
        for j, k in zip(sel[inside].tolist(), idx[inside].tolist()):
            tl = int(ts[launch[j]])
            while k >= 0 and h_end[k] < tl:  # back to the latest-starting collective op still open: the innermost
                k -= 1
            if k < 0:
                continue
            start = ts[h[k]]
            lo, hi = np.searchsorted(o_ts, start, side="left"), np.searchsorted(o_ts, tl, side="right")
            if hi > lo and o_end[lo:hi].max() >= tl:
                continue  # an operator nested in the collective launched it: its own work, not the transfer
            kind[cand[j]] = K.COMM
            changed += 1
    return changed


def _dims_nelems(dims) -> int | None:
    """Elements of a host op's first input from its ``Input Dims``: one tensor ([d0, d1, ...]) or a tensor
    list ([[d0, ...], ...], summed)."""
    if not isinstance(dims, list) or not dims:
        return None
    first = dims[0]
    shapes = (
        [first]
        if isinstance(first, list) and all(isinstance(d, int) for d in first)
        else (first if isinstance(first, list) else [])
    )
    total = 0
    for shape in shapes:
        if not isinstance(shape, list) or not shape or not all(isinstance(d, int) and d >= 0 for d in shape):
            return None
        n = 1
        for d in shape:
            n *= d
        total += n
    return total if shapes else None


def _dims_dtype(types) -> str | None:
    if not isinstance(types, list):
        return None
    return next((t for t in types if isinstance(t, str) and dtype_bytes(t) > 0), None)


class CollRecords:
    """The collective metadata of the rows whose args carry it, reduced where the events are decoded (a split
    load's workers) to what ``fill_collectives`` writes: per row the seven texts (local codes into ``texts``,
    -1 where nothing is written) and the six counts (-1 where absent or out of range). Before, the Args structs
    themselves were kept and pickled to the parent: ~0.6 GB and seconds of serial work at 1.7 M collective rows."""

    TEXTS = ("coll_op_id", "pg_name_id", "pg_desc_id", "pg_ranks_id", "dtype_id", "in_split_id", "out_split_id")
    INTS = ("group_size", "in_nelems", "out_nelems", "seq", "src_rank", "dst_rank")

    def __init__(self) -> None:
        self.texts: dict[str, int] = {}
        self.rows = np.empty(0, np.int64)
        self.codes = np.empty((0, len(self.TEXTS)), np.int32)
        self.ints = np.empty((0, len(self.INTS)), np.int64)
        self._rows: list[np.ndarray] = []
        self._codes: list[np.ndarray] = []
        self._ints: list[np.ndarray] = []
        self._ops: dict[str | None, str] = {}

    def __len__(self) -> int:
        self._join()
        return len(self.rows)

    def add(self, rows: list[int], args: list, names: list[str]) -> None:
        """The rows ``rows`` (their Args, their event names), in row order, after the rows added before."""
        if not rows:
            return
        codes, ints = [], []
        for a, name in zip(args, names):
            c, i = self._one(a, name)
            codes.append(c)
            ints.append(i)
        self._rows.append(np.asarray(rows, np.int64))
        self._codes.append(np.array(codes, np.int32))
        self._ints.append(np.array(ints, np.int64))

    def _one(self, a, name: str) -> tuple[tuple, tuple]:
        t = self._code
        if a.coll_name is None and a.in_nelems is None and a.in_size is None:  # a host op before 2024: its name
            op = normalize_op(name.split("::")[-1].split(":")[-1])
            return (
                (t(op), -1, -1, -1, t(_dims_dtype(a.input_type)), -1, -1),
                (ABSENT, _put_int("in_nelems", _dims_nelems(a.input_dims)), ABSENT, ABSENT, ABSENT, ABSENT),
            )
        known = self._ops.get(a.coll_name)
        if known is None:
            known = self._ops[a.coll_name] = normalize_op(a.coll_name)
        return (
            (
                t(known),
                t(_text(a.pg_name if a.pg_name is not None else a.pg_id)),
                t(a.pg_desc),
                t(_text(a.pg_ranks)),
                t(a.dtype),
                t(_text(a.in_split)),
                t(_text(a.out_split)),
            ),
            (
                _put_int("group_size", _int(a.group_size)),
                _put_int("in_nelems", _int(a.in_nelems if a.in_nelems is not None else a.in_size)),
                _put_int("out_nelems", _int(a.out_nelems if a.out_nelems is not None else a.out_size)),
                _put_int("seq", _int(a.seq)),
                _put_int("src_rank", _int(a.src_rank)),
                _put_int("dst_rank", _int(a.dst_rank)),
            ),
        )

    def _code(self, text) -> int:
        if not text:
            return -1
        return self.texts.setdefault(text, len(self.texts))

    def _join(self) -> None:
        if self._rows:
            self.rows = np.concatenate([self.rows, *self._rows])
            self.codes = np.concatenate([self.codes, *self._codes])
            self.ints = np.concatenate([self.ints, *self._ints])
            self._rows, self._codes, self._ints = [], [], []

    def extend(self, other: CollRecords, offset: int) -> None:
        """``other``'s rows (numbered from ``offset`` here), after this one's."""
        if not len(other):
            return
        remap = np.array([self.texts.setdefault(t, len(self.texts)) for t in other.texts] or [0], np.int32)
        self._join()
        self._rows.append(other.rows + offset)
        self._codes.append(np.where(other.codes >= 0, remap[np.maximum(other.codes, 0)], -1).astype(np.int32))
        self._ints.append(other.ints)

    def renumbered(self, rows: np.ndarray) -> CollRecords:
        """The same records on rows ``rows`` (a sub-table's numbering)."""
        self._join()
        out = CollRecords()
        out.texts, out.rows, out.codes, out.ints = self.texts, np.asarray(rows, np.int64), self.codes, self.ints
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        self._join()
        return {"rows": self.rows, "codes": self.codes, "ints": self.ints}

    def set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self._rows, self._codes, self._ints = [], [], []
        self.rows = np.array(arrays["rows"], np.int64)
        self.codes = np.array(arrays["codes"], np.int32).reshape(-1, len(self.TEXTS))
        self.ints = np.array(arrays["ints"], np.int64).reshape(-1, len(self.INTS))

    def __getstate__(self):
        self._join()
        return {"texts": self.texts, "rows": self.rows, "codes": self.codes, "ints": self.ints}

    def __setstate__(self, state) -> None:
        self._ops = {}
        self.texts = state["texts"]
        self.set_arrays(state)


def _put_int(key: str, value) -> int:
    """What ``fill_collectives`` writes for a count: the value when it is one, else absent."""
    if value is not None and 0 <= value < (2**31 if key in _INT32_FIELDS else _INT_LIMIT):
        return int(value)
    return ABSENT


def fill_collectives(
    cols,
    strings: dict[str, int],
    records: CollRecords,
    names: list[str],
    name_codes,
    world_group: bool = False,
    rules: RuleSet | None = None,
) -> int:
    """``records``: the rows whose args carry collective metadata (``CollRecords``, rows in this table's
    numbering). ``world_group``: the trace names no process groups; collectives without one are put on the
    world group (default_pg, name "0"). ``rules``: the communication rules, whose fixed ops (DeepEP's notify
    kernels, PyTorch's reduce-scatter) name the op of a kernel nothing else names. Returns how many were."""

    def sid(text: str | None) -> int:
        return ABSENT if not text else strings.setdefault(text, len(strings))

    def put(
        i: int, *, op=None, pg_name=None, pg_desc=None, ranks=None, dtype=None, in_split=None, out_split=None, **ints
    ) -> None:
        for key, value in (
            ("coll_op_id", op),
            ("pg_name_id", pg_name),
            ("pg_desc_id", pg_desc),
            ("pg_ranks_id", ranks),
            ("dtype_id", dtype),
            ("in_split_id", in_split),
            ("out_split_id", out_split),
        ):
            if value:
                cols[key][i] = sid(value)
        for key, value in ints.items():
            if value is not None and 0 <= value < (2**31 if key in _INT32_FIELDS else _INT_LIMIT):
                cols[key][i] = value

    kind = cols["kind"]
    # 1. collective args on kernels and on record_param_comms (NCCL traces); a host op without them (traces
    # before 2024): its op from its name, its size and dtype from its Input Dims / Input type (CollRecords)
    _write_records(cols, strings, records)
    # 2. tracekit's own annotations (gloo runs)
    tk_rows = np.flatnonzero(((kind == K.CPU_COMM_OP) | (kind == K.SYNC)) & (cols["device"] < 0))
    parsed: dict[int, comm_annotation.CommAnnotation] = {}
    for i in tk_rows:
        ann = comm_annotation.parse(names[name_codes[i]])
        if ann is None:
            continue
        parsed[int(i)] = ann
        put(
            int(i),
            op=normalize_op(ann.op) or ann.op,
            pg_name=ann.pg_name,
            pg_desc=ann.pg_desc,
            ranks=f"[{', '.join(ann.ranks.split(','))}]" if ann.ranks else None,
            dtype=ann.dtype,
            in_split=ann.in_split,
            out_split=ann.out_split,
            in_nelems=ann.in_nelems,
            out_nelems=ann.out_nelems,
            in_bytes=ann.in_bytes,
            out_bytes=ann.out_bytes,
            seq=ann.seq,
            src_rank=ann.src_rank,
            dst_rank=ann.dst_rank,
            group_size=len(ann.ranks_tuple) or None,
        )
    _op_from_host_names(cols, names, name_codes, sid)
    _link_device_kernels(cols, strings)
    # 3. op from the name's rule, else the name, where nothing better is known (gloo spans: their own op, then
    # the annotation's rest); once per distinct name
    comm = np.flatnonzero((kind == K.COMM) & (cols["coll_op_id"] < 0))
    if len(comm):
        codes = np.unique(name_codes[comm])
        ops = (rules or RuleSet()).ops(names[c] for c in codes.tolist())
        op_ids = np.array([sid(op) if op else ABSENT for op in ops], np.int64)
        cols["coll_op_id"][comm] = op_ids[np.searchsorted(codes, name_codes[comm])]
    _link_gloo_spans(cols, parsed, strings)
    _fill_bytes(cols, strings)
    return _world_group(cols, strings, sid) if world_group else 0


def _write_records(cols, strings: dict[str, int], records: CollRecords) -> None:
    """The records into the (still empty) collective columns. The texts take string ids in the order the rows,
    then the fields, first name them: the order in which writing them row by row would have added them."""
    if not len(records):
        return
    codes, rows = records.codes, records.rows
    texts = list(records.texts)
    flat = codes.ravel()
    present = flat[flat >= 0]
    uniq, first = np.unique(present, return_index=True)
    ids = np.full(max(len(texts), 1), ABSENT, np.int64)
    for c in uniq[np.argsort(first, kind="stable")].tolist():
        ids[c] = strings.setdefault(texts[c], len(strings))
    for j, key in enumerate(CollRecords.TEXTS):
        col = codes[:, j]
        cols[key][rows] = np.where(col >= 0, ids[np.maximum(col, 0)], ABSENT)
    for j, key in enumerate(CollRecords.INTS):
        cols[key][rows] = records.ints[:, j]


_P2P = ("send", "recv", "send_recv")


def _world_group(cols, strings: dict[str, int], sid) -> int:
    """Collectives on the device with an op but no process group, in a trace that names none: the world."""
    text = {v: k for k, v in strings.items()}
    rows = np.flatnonzero((cols["kind"] == K.COMM) & (cols["coll_op_id"] >= 0) & (cols["pg_name_id"] < 0))
    rows = rows[[text.get(int(c), "") not in _P2P for c in cols["coll_op_id"][rows]]] if len(rows) else rows
    if len(rows):
        cols["pg_name_id"][rows] = sid("0")
        cols["pg_desc_id"][rows] = sid("default_pg")
    return len(rows)


def _op_from_host_names(cols, names: list[str], name_codes, sid) -> None:
    """A collective host op without args (c10d::allreduce_, nccl:all_to_all) says its op by its name."""
    rows = np.flatnonzero((cols["kind"] == K.CPU_COMM_OP) & (cols["coll_op_id"] < 0) & (cols["device"] < 0))
    if not len(rows):
        return
    issuer = _issuer_names(names)
    ops: dict[int, str] = {}
    for c in np.unique(name_codes[rows]).tolist():
        name = names[c]
        if issuer[c] and name != "record_param_comms":
            ops[c] = normalize_op(name.split("::")[-1].split(":")[-1])
    for c, op in ops.items():
        if op:
            cols["coll_op_id"][rows[name_codes[rows] == c]] = sid(op)


def _copy(cols, dst: np.ndarray, src: np.ndarray) -> None:
    for key in _FIELDS:
        col = cols[key]
        take = col[dst] < 0
        col[dst[take]] = col[src[take]]


def _link_device_kernels(cols, strings: dict[str, int]) -> None:
    """Comm kernels without args take them from the host collective op that launched them: the
    record_param_comms (or c10d/nccl op) enclosing the launch call on the same thread. A SendRecv kernel that
    an all-to-all launched is that all-to-all."""
    kind = cols["kind"]
    send_recv, all_to_all = strings.get("send_recv", -2), strings.get("all_to_all", -2)
    op = cols["coll_op_id"]
    need = np.flatnonzero((kind == K.COMM) & (cols["device"] >= 0) & ((op < 0) | (op == send_recv)) & (cols["correlation"] >= 0))
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
        src = h[idx[ok]]
        a2a = (op[k[ok]] == send_recv) & (op[src] == all_to_all)
        op[k[ok][a2a]] = all_to_all
        _copy(cols, k[ok][op[k[ok]] != send_recv], src[op[k[ok]] != send_recv])


# gloo carries some collectives out as another op: reduce_scatter as an all_reduce plus a slice, a ring exchange
# written as all_to_all_single as an all_to_all. A span may answer an annotation of any op in its class.
_SPAN_OPS = {
    "reduce_scatter": ("reduce_scatter", "all_reduce"),
    "send_recv": ("all_to_all", "send", "recv"),
    "send": ("send", "all_to_all"),
    "recv": ("recv", "all_to_all"),
    "all_gather": ("all_gather",),
    "gather": ("gather", "all_gather"),
    "scatter": ("scatter", "all_to_all"),
}


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
    links: list[tuple[int, int]] = []
    learnt: dict[int, str] = {}
    for s in spans:
        span_op = text.get(int(cols["coll_op_id"][s]), "")
        start = cols["ts_ns"][s]
        heads = {
            pg: q[0]
            for pg, q in pending.items()
            if q and cols["ts_ns"][q[0]] <= start and span_op in _SPAN_OPS.get(parsed[q[0]].op, (parsed[q[0]].op,))
        }
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


def unknown_dtype_warnings(table, path: str) -> list[str]:
    """One warning for the collectives whose element count is known but whose dtype spelling is not one of
    PyTorch's scalar types (model/dtypes.py): their bytes stay unknown (null, never 0), counted per spelling."""
    kind = table["kind"]
    rows = np.flatnonzero((kind == K.COMM) & (table["dtype_id"] >= 0))
    if not len(rows):
        return []
    nelems = (table["in_nelems"][rows] >= 0) | (table["out_nelems"][rows] >= 0)
    sized = (table["in_bytes"][rows] >= 0) | (table["out_bytes"][rows] >= 0)
    miss = rows[nelems & ~sized]
    if not len(miss):
        return []
    codes, counts = np.unique(table["dtype_id"][miss], return_counts=True)
    spelled = [(int(n), table.strings[int(c)]) for c, n in zip(codes, counts) if dtype_bytes(table.strings[int(c)]) < 0]
    if not spelled:
        return []
    spelled.sort(key=lambda t: (-t[0], t[1]))
    listed = ", ".join(f"{s[:40]!r} ×{n}" for n, s in spelled[:5]) + (f" and {len(spelled) - 5} more" if len(spelled) > 5 else "")
    return [
        f"{path}: {sum(n for n, _ in spelled)} collectives carry a dtype of unknown size ({listed}): their bytes "
        "and bus bandwidth are unknown (null, shown as —); tracekit knows the sizes of PyTorch's scalar types"
    ]


# -- correlation plausibility: a kernel cannot start before the launch that queued it --------------------------------
# Kineto writes device and host times on one clock; on real traces (tests/data, 19 traces, ~40,000 links) every
# device event starts at least 2 µs after its launch. One that starts earlier than this names the wrong launch.
CLOCK_NOISE_NS = 5_000
# A rank where at least this many links (and this share of them) are impossible has correlation ids that cannot be
# trusted at all (shifted, reused, merged from another run): every link is broken, not only the impossible ones.
UNUSABLE_LINKS = 10
UNUSABLE_SHARE = 0.01


def break_implausible_links(cols, is_device: np.ndarray) -> tuple[int, int, bool]:
    """Device events that start more than CLOCK_NOISE_NS before the (earliest) runtime call their correlation id
    names lose the link (correlation set absent: they are placed by time, as events without a launch record are).
    Where many do (UNUSABLE_LINKS, UNUSABLE_SHARE), every device event's link is broken. Returns (impossible links,
    links examined, whether the rank's ids are unusable). Runs before steps are assigned, so no figure sees a link
    that cannot be."""
    kind, corr, ts = cols["kind"], cols["correlation"], cols["ts_ns"]
    rt = np.flatnonzero((kind == K.RUNTIME) & (corr >= 0))
    dev = np.flatnonzero(is_device & (corr >= 0) & (kind != K.RUNTIME))
    if not len(rt) or not len(dev):
        return 0, 0, False
    order = np.lexsort((ts[rt], corr[rt]))
    rc, rts = corr[rt][order], ts[rt][order]
    first = np.ones(len(rc), dtype=bool)
    first[1:] = rc[1:] != rc[:-1]
    rc, rts = rc[first], rts[first]  # the earliest call of each correlation id
    at = np.clip(np.searchsorted(rc, corr[dev]), 0, len(rc) - 1)
    linked = rc[at] == corr[dev]
    early = linked & (ts[dev] < rts[at] - CLOCK_NOISE_NS)
    n_early, n_linked = int(early.sum()), int(linked.sum())
    unusable = n_early >= UNUSABLE_LINKS and n_early >= UNUSABLE_SHARE * n_linked
    broken = dev[linked] if unusable else dev[early]
    if len(broken):
        corr[broken] = ABSENT
    return n_early, n_linked, unusable
