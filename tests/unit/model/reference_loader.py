"""The loader as it was before the performance work (commit 2a1715b): decode the whole file into structs,
then build every column from the full event list. Kept as the straightforward reference the optimised,
streaming loader must match bit for bit (tests/unit/model/test_loader_equivalence.py)."""
# ruff: noqa
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.model.classify import HOST_COMM_OP, RuleSet
from tracekit.model.decode import Trace
from tracekit.model.events import ABSENT, COLUMNS, EventKind as K, EventTable

from tracekit.model.traceset import ProcessGroup, RankInfo

DEVICE_CATS = {"kernel": K.KERNEL, "gpu_memcpy": K.MEMCPY, "gpu_memset": K.MEMSET, "cuda_sync": K.SYNC,
               "gpu_user_annotation": K.ANNOTATION}
HOST_CATS = {"cpu_op": K.CPU_OP, "user_annotation": K.ANNOTATION, "cuda_runtime": K.RUNTIME,
             "cuda_driver": K.RUNTIME, "cpu_instant_event": K.MEMORY, "python_function": K.OTHER}
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_DROP_CATS = {"Trace", "python_function"}


def build_table(trace: Trace, path: str, rules: RuleSet, warnings: list[str],
                exact: tuple[list, list] | None = None) -> tuple[EventTable, RankInfo]:
    """``exact``: (ts_ns, dur_ns) per trace event decoded exactly, for ns-resolution epoch timestamps."""
    events = trace.traceEvents or []
    thread_names = {(e.pid, e.tid): e.args.name for e in events
                    if e.ph == "M" and e.name == "thread_name" and e.args is not None and e.args.name}
    flow_cats = {e.cat for e in events if e.ph in ("s", "f")}
    keep = [i for i, e in enumerate(events)
            if (e.ph == "X" and e.cat not in _DROP_CATS) or (e.ph == "i" and e.name == "[memory]")]
    kept = [events[i] for i in keep]
    if exact is not None and len(exact[0]) == len(events):
        exact = ([exact[0][i] for i in keep], [exact[1][i] for i in keep])
    else:
        exact = None
    table, n_bad = _columns(kept, trace.baseTimeNanoseconds or 0, rules, thread_names, exact)
    if n_bad:
        warnings.append(f"{path}: dropped {n_bad} events with missing, non-finite or negative times/durations")
    if len(table) and not (table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET).any()
                           or table.mask_kind(K.STEP).any() or table.mask_kind(K.CPU_OP).any()):
        warnings.append(f"{path}: no kernels, operators or steps in the trace; was the profiler active?")
    info = _rank_info(trace, path, table, flow_cats, kept, warnings)
    return table, info


def _array(values: list, dtype, fill=ABSENT) -> np.ndarray:
    try:
        return np.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else fill for v in values],
                        dtype=dtype)


def _ints(values: list) -> np.ndarray:
    """int64 column; None, strings, non-finite and out-of-range values become -1 (absent)."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_int_or_absent(v) for v in values], dtype=np.int64)


def _int_or_absent(v) -> int:
    if type(v) is int:
        return v if -2**62 < v < 2**62 else ABSENT
    if type(v) is float and v == v and abs(v) < 2**62:
        return int(v)
    return ABSENT


def _columns(kept, base_ns: int, rules: RuleSet, thread_names: dict, exact) -> tuple[EventTable, int]:
    ts = _array([e.ts for e in kept], np.float64, np.nan)
    dur = _array([e.dur for e in kept], np.float64, np.nan)
    is_instant = np.array([e.ph == "i" for e in kept], dtype=bool)
    dur = np.where(is_instant & np.isnan(dur), 0.0, dur)
    good = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & (np.abs(ts) < 9e15) & (dur < 9e15)
    n_bad = int((~good).sum())
    if exact is not None:
        ts_ns, dur_ns = _ints(exact[0])[good], _ints(exact[1])[good]
        dur_ns[is_instant[good] & (dur_ns < 0)] = 0
    if n_bad:
        kept = [e for e, g in zip(kept, good) if g]
        ts, dur = ts[good], dur[good]
    if exact is None:
        ts_ns = _to_ns(ts)
        dur_ns = np.rint(dur * 1000.0).astype(np.int64)
    ts_ns = ts_ns + np.int64(base_ns)

    strings: dict[str, int] = {}
    name_codes, name_uniques = pd.factorize(np.array([e.name for e in kept], dtype=object))
    cat_codes, cat_uniques = pd.factorize(np.array([e.cat for e in kept], dtype=object))
    name_map = _intern(strings, name_uniques)
    cat_map = _intern(strings, cat_uniques)
    name_id = name_map[name_codes] if len(kept) else np.empty(0, np.int32)
    cat_id = cat_map[cat_codes] if len(kept) else np.empty(0, np.int32)

    pid = _ints([e.pid for e in kept])
    tid = _ints([e.tid for e in kept])
    args = [e.args for e in kept]
    correlation = _ints([a.correlation if a is not None else None for a in args])
    external = _ints([a.external_id if a is not None else None for a in args])
    dev_arg = _ints([a.device if a is not None else None for a in args])

    kind, is_device = _kinds(cat_codes, list(cat_uniques), name_codes, list(name_uniques), rules, args)
    gloo_threads = {tid_ for (pid_, tid_), nm in thread_names.items() if "gloo" in str(nm)}
    gloo_threads |= set(np.unique(tid[(kind == K.COMM) & ~is_device]).tolist())
    on_gloo = np.isin(tid, np.array(sorted(t for t in gloo_threads if isinstance(t, int)), dtype=np.int64))
    kind[(kind == K.CPU_OP) & on_gloo] = K.CPU_COMM_OP

    device = np.where(is_device, np.where(dev_arg >= 0, dev_arg, pid), -1).astype(np.int16)
    n = len(kept)
    cols = {k: np.full(n, ABSENT, dtype=d) for k, d in COLUMNS.items()}
    cols.update(ts_ns=ts_ns, dur_ns=dur_ns, kind=kind.astype(np.int8), device=device, pid=pid, stream=tid,
                name_id=name_id.astype(np.int32), cat_id=cat_id.astype(np.int32), correlation=correlation,
                external_id=external)
    mem = np.flatnonzero(kind == K.MEMORY)
    cols["mem_bytes"][mem] = _ints([args[i].mem_bytes if args[i] is not None else None for i in mem])
    cols["mem_total"][mem] = _ints([args[i].mem_total if args[i] is not None else None for i in mem])
    cp = np.flatnonzero((kind == K.MEMCPY) | (kind == K.MEMSET))
    cols["mem_bytes"][cp] = _ints([args[i].copy_bytes if args[i] is not None else None for i in cp])
    cols["step"] = _assign_steps(cols, kind, name_uniques, name_codes, is_device)
    fill_collectives(cols, strings, args, list(name_uniques), name_codes)
    return EventTable(cols, tuple(strings)), n_bad


def _to_ns(ts_us: np.ndarray) -> np.ndarray:
    """µs floats -> int64 ns without losing the integer part to float rounding."""
    whole = np.floor(ts_us)
    return whole.astype(np.int64) * 1000 + np.rint((ts_us - whole) * 1000.0).astype(np.int64)


def _intern(strings: dict[str, int], uniques) -> np.ndarray:
    return np.array([strings.setdefault(str(u), len(strings)) for u in uniques], dtype=np.int32)


def _kinds(cat_codes, cats, name_codes, names, rules: RuleSet, args) -> tuple[np.ndarray, np.ndarray]:
    cat_kind = np.array([int(DEVICE_CATS.get(c, HOST_CATS.get(c, K.OTHER))) for c in cats] or [0], dtype=np.int8)
    cat_dev = np.array([c in DEVICE_CATS for c in cats] or [False], dtype=bool)
    kind = cat_kind[cat_codes].copy() if len(cat_codes) else np.empty(0, np.int8)
    is_device = cat_dev[cat_codes] if len(cat_codes) else np.empty(0, bool)
    matched = rules.match(names)
    comm_name = np.array([m is not None for m in matched] or [False], dtype=bool)[name_codes]
    step_name = np.array([bool(_STEP.match(n)) for n in names] or [False], dtype=bool)[name_codes]
    host_comm = np.array([bool(HOST_COMM_OP.match(n)) for n in names] or [False], dtype=bool)[name_codes]
    tk_wait = np.array([n.startswith("tracekit:wait|") for n in names] or [False], dtype=bool)[name_codes]
    tk_comm = np.array([n.startswith("tracekit:comm|") for n in names] or [False], dtype=bool)[name_codes]
    has_coll = np.array([a is not None and a.coll_name is not None for a in args], dtype=bool)
    kernel = kind == K.KERNEL
    kind[kernel & (comm_name | has_coll)] = K.COMM
    annot = (kind == K.ANNOTATION) & ~is_device
    kind[annot & comm_name] = K.COMM  # gloo:* worker-thread spans
    kind[annot & step_name] = K.STEP
    kind[annot & tk_wait] = K.SYNC
    kind[annot & tk_comm] = K.CPU_COMM_OP
    kind[(kind == K.CPU_OP) & host_comm] = K.CPU_COMM_OP
    return kind, is_device


def _assign_steps(cols, kind, name_uniques, name_codes, is_device) -> np.ndarray:
    n = len(kind)
    step = np.full(n, ABSENT, dtype=np.int32)
    srows = np.flatnonzero(kind == K.STEP)
    if len(srows) == 0:
        return step
    numbers = np.array([int(_STEP.match(name_uniques[c]).group(1)) for c in name_codes[srows]], dtype=np.int32)
    order = np.argsort(cols["ts_ns"][srows], kind="stable")
    srows, numbers = srows[order], numbers[order]
    starts, ends = cols["ts_ns"][srows], cols["ts_ns"][srows] + cols["dur_ns"][srows]
    ts = cols["ts_ns"]
    idx = np.searchsorted(starts, ts, side="right") - 1
    inside = (idx >= 0) & (ts < ends[np.clip(idx, 0, None)])
    step = np.where(inside, numbers[np.clip(idx, 0, None)], ABSENT).astype(np.int32)
    step[srows] = numbers
    # device work belongs to the step of the host call that launched it (launch -> kernel correlation)
    rt = np.flatnonzero((kind == K.RUNTIME) & (cols["correlation"] >= 0))
    dev = np.flatnonzero(is_device & (cols["correlation"] >= 0))
    if len(rt) and len(dev):
        rc = cols["correlation"][rt]
        o = np.argsort(rc, kind="stable")
        rc, rsteps = rc[o], step[rt][o]
        pos = np.clip(np.searchsorted(rc, cols["correlation"][dev]), 0, len(rc) - 1)
        hit = rc[pos] == cols["correlation"][dev]
        step[dev[hit]] = rsteps[pos[hit]]
    return step


def _rank_info(trace: Trace, path: str, table: EventTable, flow_cats: set, kept, warnings) -> RankInfo:
    di = trace.distributedInfo
    rank = di.rank if di is not None and di.rank is not None else -1
    world = di.world_size if di is not None and di.world_size is not None else -1
    groups = []
    pg_style = "absent"
    for pg in (di.pg_config or []) if di is not None else []:
        pg_style = "pg_desc" if pg.pg_desc is not None else ("uid" if pg.uid is not None else pg_style)
        name = pg.pg_name if pg.pg_name is not None else pg.uid
        ranks = pg.ranks if isinstance(pg.ranks, list) else _parse_ranks(pg.ranks)
        groups.append(ProcessGroup(str(name), pg.pg_desc or "", tuple(int(r) for r in ranks if isinstance(r, int)),
                                   int(pg.pg_size or len(ranks)), pg.backend_config or ""))
    dev_mask = table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET) & (table["device"] >= 0)
    names = table.decode("name_id")[table.mask_kind(K.KERNEL, K.COMM)] if dev_mask.any() else []
    rocm = any(isinstance(n, str) and ("hip" in n.lower() or "rccl" in n.lower()) for n in names[:2000]) or any(
        "gfx" in str(p.get("computeMajor", "")) or "AMD" in str(p.get("name", "")) for p in trace.deviceProperties or [])
    device_type = ("rocm" if rocm else "cuda") if dev_mask.any() else "cpu"
    ints = [e.ts for e in kept[:1000] if e.ts is not None]
    generation = {
        "distributed_info": "absent" if di is None else ("pg_config" if di.pg_config else "basic")
        + ("+nccl_version" if di is not None and di.nccl_version else ""),
        "pg_config": pg_style,
        "msg_fields": _msg_style(kept),
        "flow_category": "ac2g" if "ac2g" in flow_cats else ("async_cpu_to_gpu" if "async_cpu_to_gpu" in flow_cats
                                                              else "none"),
        "timestamps": "int" if ints and all(isinstance(t, int) for t in ints) else "float",
        "base_time": "present" if trace.baseTimeNanoseconds else "absent",
        "platform": device_type,
    }
    return RankInfo(rank=rank, world_size=world, backend=(di.backend or "") if di is not None else "",
                    source=path, process_groups=tuple(groups), device_type=device_type,
                    device_properties=tuple(trace.deviceProperties or ()),
                    base_time_ns=int(trace.baseTimeNanoseconds or 0), trace_id=str(trace.trace_id or ""),
                    nccl_version=(di.nccl_version or "") if di is not None else "",
                    host_name=str(trace.host_name or ""), generation=generation, warnings=tuple(warnings))


def _parse_ranks(text) -> list[int]:
    if not isinstance(text, str):
        return []
    return [int(x) for x in re.findall(r"-?\d+", text)]


def _msg_style(kept) -> str:
    for e in kept:
        a = e.args
        if a is not None:
            if a.in_nelems is not None:
                return "nelems"
            if a.in_size is not None:
                return "size"
    return "none"

# ---- linking.py as it was ----
from collections import defaultdict, deque

import numpy as np

from tracekit.model import annotations
from tracekit.model.classify import dtype_bytes, normalize_op
from tracekit.model.events import ABSENT, EventKind as K

_STR_FIELDS = ("coll_op_id", "pg_name_id", "pg_desc_id", "pg_ranks_id", "dtype_id", "in_split_id", "out_split_id")
_INT_FIELDS = ("group_size", "in_nelems", "out_nelems", "in_bytes", "out_bytes", "seq", "src_rank", "dst_rank")
_FIELDS = _STR_FIELDS + _INT_FIELDS


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _int(value) -> int:
    try:
        return int(value) if value is not None and value != "" else ABSENT
    except (TypeError, ValueError):
        return ABSENT


def fill_collectives(cols, strings: dict[str, int], args, names: list[str], name_codes) -> None:
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
            if value is not None and value >= 0:
                cols[key][i] = value

    kind = cols["kind"]
    # 1. collective args on kernels and on record_param_comms (NCCL traces)
    for i, a in enumerate(args):
        if a is None or (a.coll_name is None and a.in_nelems is None and a.in_size is None):
            continue
        put(i, op=normalize_op(a.coll_name), pg_name=_text(a.pg_name if a.pg_name is not None else a.pg_id),
            pg_desc=a.pg_desc, ranks=_text(a.pg_ranks), dtype=a.dtype, in_split=_text(a.in_split),
            out_split=_text(a.out_split), group_size=_int(a.group_size),
            in_nelems=_int(a.in_nelems if a.in_nelems is not None else a.in_size),
            out_nelems=_int(a.out_nelems if a.out_nelems is not None else a.out_size),
            seq=_int(a.seq), src_rank=_int(a.src_rank), dst_rank=_int(a.dst_rank))
    # 2. tracekit's own annotations (gloo runs)
    tk_rows = np.flatnonzero(((kind == K.CPU_COMM_OP) | (kind == K.SYNC)) & (cols["device"] < 0))
    parsed: dict[int, annotations.CommAnnotation] = {}
    for i in tk_rows:
        ann = annotations.parse(names[name_codes[i]])
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
    _link_gloo_spans(cols, parsed)
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


def _link_gloo_spans(cols, parsed: dict) -> None:
    """A gloo span on a worker thread takes the metadata of the tracekit:comm annotation that issued it:
    the first earlier-issued annotation of the same op not yet matched (gloo runs a group's work in order)."""
    kind = cols["kind"]
    spans = np.flatnonzero((kind == K.COMM) & (cols["device"] < 0))
    issues = [i for i, a in sorted(parsed.items(), key=lambda kv: cols["ts_ns"][kv[0]]) if not a.is_wait]
    if not len(spans) or not issues:
        return
    pending: dict[int, deque] = defaultdict(deque)
    for i in issues:
        pending[cols["coll_op_id"][i]].append(i)
    for s in spans[np.argsort(cols["ts_ns"][spans], kind="stable")]:
        # the gloo span's own op is only known by name here: rows were filled by annotations for issues
        queue = _queue_for(cols, s, pending)
        if queue is None:
            continue
        src = queue.popleft()
        _copy(cols, np.array([s]), np.array([src]))
        cols["step"][s] = cols["step"][src]


def _queue_for(cols, span: int, pending: dict):
    op = cols["coll_op_id"][span]
    start = cols["ts_ns"][span]
    if op >= 0 and pending.get(op):
        q = pending[op]
        return q if cols["ts_ns"][q[0]] <= start else None
    return None


def _fill_bytes(cols, strings: dict[str, int]) -> None:
    lookup = {sid: dtype_bytes(text) for text, sid in strings.items()}
    rows = np.flatnonzero((cols["dtype_id"] >= 0) & ((cols["in_nelems"] >= 0) | (cols["out_nelems"] >= 0)))
    for i in rows:
        size = lookup.get(int(cols["dtype_id"][i]), -1)
        if size < 0:
            continue
        for n_key, b_key in (("in_nelems", "in_bytes"), ("out_nelems", "out_bytes")):
            if cols[b_key][i] < 0 and cols[n_key][i] >= 0:
                cols[b_key][i] = cols[n_key][i] * size


def reference_load(path: str, rules=None):
    """(EventTable, RankInfo) of one trace file the pre-optimisation way (no cache)."""
    from tracekit.model.decode import DEFAULT_MAX_BYTES, decode, exact_times_ns, needs_exact_times, read_bytes

    data = read_bytes(path, DEFAULT_MAX_BYTES)
    trace, warnings = decode(data, path)
    exact = exact_times_ns(data) if needs_exact_times(trace) else None
    return build_table(trace, path, rules or RuleSet(), warnings, exact)
