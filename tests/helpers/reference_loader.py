"""The loader as it was before the performance work (commit 2a1715b): decode the whole file into structs,
then build every column from the full event list. Kept as the straightforward reference the optimised,
streaming loader must match bit for bit (tests/unit/loader/test_loader_equivalence.py)."""

# ruff: noqa
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.loader.classify import HOST_COMM_OP, RuleSet
from tracekit.loader.decode import Trace
from tracekit.model.events import ABSENT, COLUMNS, EventKind as K, EventTable, memory_device_code

from tracekit.model.traceset import ProcessGroup, RankInfo

DEVICE_CATS = {
    "kernel": K.KERNEL,
    "gpu_memcpy": K.MEMCPY,
    "gpu_memset": K.MEMSET,
    "cuda_sync": K.SYNC,
    "gpu_user_annotation": K.ANNOTATION,
}
HOST_CATS = {
    "cpu_op": K.CPU_OP,
    "user_annotation": K.ANNOTATION,
    "cuda_runtime": K.RUNTIME,
    "cuda_driver": K.RUNTIME,
    "cpu_instant_event": K.MEMORY,
    "python_function": K.OTHER,
}
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_DROP_CATS = {"Trace", "python_function"}


def build_table(
    trace: Trace, path: str, rules: RuleSet, warnings: list[str], exact: tuple[list, list] | None = None
) -> tuple[EventTable, RankInfo]:
    """``exact``: (ts_ns, dur_ns) per trace event decoded exactly, for ns-resolution epoch timestamps."""
    events = trace.traceEvents or []
    thread_names = {
        (e.pid, e.tid): e.args.name
        for e in events
        if e.ph == "M" and e.name == "thread_name" and e.args is not None and e.args.name
    }
    flow_cats = {e.cat for e in events if e.ph in ("s", "f")}
    keep = [
        i for i, e in enumerate(events) if (e.ph == "X" and e.cat not in _DROP_CATS) or (e.ph == "i" and e.name == "[memory]")
    ]
    kept = [events[i] for i in keep]
    if exact is not None and len(exact[0]) == len(events):
        exact = ([exact[0][i] for i in keep], [exact[1][i] for i in keep])
    else:
        exact = None
    named = bool(trace.distributedInfo is not None and trace.distributedInfo.pg_config)
    table, n_bad, assumed = _columns(kept, trace.baseTimeNanoseconds or 0, rules, thread_names, exact, named)
    if assumed:
        warnings.append(
            f"{path}: the trace names no process groups (distributedInfo without pg_config); "
            f"{assumed} collectives without a group are assumed to run on the world group "
            "(default_pg) and are matched across ranks by their order"
        )
    if n_bad:
        warnings.append(f"{path}: dropped {n_bad} events with missing, non-finite or negative times/durations")
    if len(table) and not (
        table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET).any()
        or table.mask_kind(K.STEP).any()
        or table.mask_kind(K.CPU_OP).any()
    ):
        warnings.append(f"{path}: no kernels, operators or steps in the trace; was the profiler active?")
    info = _rank_info(trace, path, table, flow_cats, kept, warnings)
    return table, info


def _array(values: list, dtype, fill=ABSENT) -> np.ndarray:
    try:
        return np.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else fill for v in values], dtype=dtype)


def _ints(values: list) -> np.ndarray:
    """int64 column; None, strings, non-finite and out-of-range values become -1 (absent)."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_int_or_absent(v) for v in values], dtype=np.int64)


def _int_or_absent(v) -> int:
    if type(v) is int:
        return v if -(2**62) < v < 2**62 else ABSENT
    if type(v) is float and v == v and abs(v) < 2**62:
        return int(v)
    return ABSENT


def _columns(kept, base_ns: int, rules: RuleSet, thread_names: dict, exact, named=True):
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
    tid = _ints([_tid(e.tid) for e in kept])
    args = [e.args for e in kept]
    correlation = _ints([a.correlation if a is not None else None for a in args])
    external = _ints([a.external_id if a is not None else None for a in args])
    dev_arg = _ints([a.device if a is not None else None for a in args])

    kind, is_device = _kinds(cat_codes, list(cat_uniques), name_codes, list(name_uniques), rules, args, pid)
    gloo_threads = {tid_ for (pid_, tid_), nm in thread_names.items() if "gloo" in str(nm)}
    gloo_threads |= set(np.unique(tid[(kind == K.COMM) & ~is_device]).tolist())
    on_gloo = np.isin(tid, np.array(sorted(t for t in gloo_threads if isinstance(t, int)), dtype=np.int64))
    kind[(kind == K.CPU_OP) & on_gloo] = K.CPU_COMM_OP

    device = np.where(is_device, np.where(dev_arg >= 0, dev_arg, pid), -1).astype(np.int16)
    n = len(kept)
    cols = {k: np.full(n, ABSENT, dtype=d) for k, d in COLUMNS.items()}
    cols.update(
        ts_ns=ts_ns,
        dur_ns=dur_ns,
        kind=kind.astype(np.int8),
        device=device,
        pid=pid,
        stream=tid,
        name_id=name_id.astype(np.int32),
        cat_id=cat_id.astype(np.int32),
        correlation=correlation,
        external_id=external,
    )
    mem = np.flatnonzero(kind == K.MEMORY)
    cols["mem_bytes"][mem] = _ints([args[i].mem_bytes if args[i] is not None else None for i in mem])
    cols["mem_total"][mem] = _ints([args[i].mem_total if args[i] is not None else None for i in mem])
    cols["mem_reserved"][mem] = _ints([args[i].mem_reserved if args[i] is not None else None for i in mem])
    cols["mem_addr"][mem] = _ints([args[i].mem_addr if args[i] is not None else None for i in mem])
    cols["mem_device"][mem] = [
        memory_device_code(
            *(_ints([getattr(args[i], k, None) if args[i] is not None else None])[0] for k in ("mem_dev_type", "mem_dev_id"))
        )
        for i in mem
    ]
    cp = np.flatnonzero((kind == K.MEMCPY) | (kind == K.MEMSET))
    cols["mem_bytes"][cp] = _ints([args[i].copy_bytes if args[i] is not None else None for i in cp])
    cols["step"] = _assign_steps(cols, kind, name_uniques, name_codes, is_device)
    comm_from_launch_context(cols, list(name_uniques), name_codes)
    assumed = fill_collectives(cols, strings, args, list(name_uniques), name_codes, [e.name for e in kept], named)
    return EventTable(cols, tuple(strings)), n_bad, assumed


def _to_ns(ts_us: np.ndarray) -> np.ndarray:
    """µs floats -> int64 ns without losing the integer part to float rounding."""
    whole = np.floor(ts_us)
    return whole.astype(np.int64) * 1000 + np.rint((ts_us - whole) * 1000.0).astype(np.int64)


def _intern(strings: dict[str, int], uniques) -> np.ndarray:
    return np.array([strings.setdefault(str(u), len(strings)) for u in uniques], dtype=np.int32)


def _kinds(cat_codes, cats, name_codes, names, rules: RuleSet, args, pid) -> tuple[np.ndarray, np.ndarray]:
    """The real kinds module (its evidence rules apply to both sides), fed from the full event list."""
    from tracekit.loader.kinds import classify_kinds

    has_coll = np.array([a is not None and a.coll_name is not None for a in args], dtype=bool)
    return classify_kinds(cat_codes, cats, name_codes, names, rules, has_coll, pid)


def _kinds_before_evidence(cat_codes, cats, name_codes, names, rules: RuleSet, args) -> tuple[np.ndarray, np.ndarray]:
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
    """The real rank_info (rank 0 of 1 without distributedInfo, generations, device type from evidence), fed
    the facts gathered from the full event list."""
    from tracekit.loader.rankinfo import Facts, rank_info

    style = _msg_style(kept)
    facts = Facts(flow_cats=set(flow_cats), first_ts=[e.ts for e in kept[:1000]], msg_style=None if style == "none" else style)
    return rank_info(trace, path, table, facts, warnings)


def _rank_info_before_evidence(trace: Trace, path: str, table: EventTable, flow_cats: set, kept, warnings) -> RankInfo:
    di = trace.distributedInfo
    rank = di.rank if di is not None and di.rank is not None else -1
    world = di.world_size if di is not None and di.world_size is not None else -1
    groups = []
    pg_style = "absent"
    for pg in (di.pg_config or []) if di is not None else []:
        pg_style = "pg_desc" if pg.pg_desc is not None else ("uid" if pg.uid is not None else pg_style)
        name = pg.pg_name if pg.pg_name is not None else pg.uid
        ranks = pg.ranks if isinstance(pg.ranks, list) else _parse_ranks(pg.ranks)
        groups.append(
            ProcessGroup(
                str(name),
                pg.pg_desc or "",
                tuple(int(r) for r in ranks if isinstance(r, int)),
                int(pg.pg_size or len(ranks)),
                pg.backend_config or "",
            )
        )
    dev_mask = table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET) & (table["device"] >= 0)
    names = table.decode("name_id")[table.mask_kind(K.KERNEL, K.COMM)] if dev_mask.any() else []
    rocm = any(isinstance(n, str) and ("hip" in n.lower() or "rccl" in n.lower()) for n in names[:2000]) or any(
        "gfx" in str(p.get("computeMajor", "")) or "AMD" in str(p.get("name", "")) for p in trace.deviceProperties or []
    )
    device_type = ("rocm" if rocm else "cuda") if dev_mask.any() else "cpu"
    ints = [e.ts for e in kept[:1000] if e.ts is not None]
    generation = {
        "distributed_info": "absent"
        if di is None
        else ("pg_config" if di.pg_config else "basic") + ("+nccl_version" if di is not None and di.nccl_version else ""),
        "pg_config": pg_style,
        "msg_fields": _msg_style(kept),
        "flow_category": next((c for c in ("ac2g", "async_cpu_to_gpu", "async_gpu", "async") if c in flow_cats), "none"),
        "timestamps": "int" if ints and all(isinstance(t, int) for t in ints) else "float",
        "base_time": "present" if trace.baseTimeNanoseconds else "absent",
        "platform": device_type,
    }
    return RankInfo(
        rank=rank,
        world_size=world,
        backend=(di.backend or "") if di is not None else "",
        source=path,
        process_groups=tuple(groups),
        device_type=device_type,
        device_properties=tuple(trace.deviceProperties or ()),
        base_time_ns=int(trace.baseTimeNanoseconds or 0),
        trace_id=str(trace.trace_id or ""),
        nccl_version=(di.nccl_version or "") if di is not None else "",
        host_name=str(trace.host_name or ""),
        generation=generation,
        warnings=tuple(warnings),
    )


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


# ---- linking: the real module (its fixes apply to both sides), fed the way the old loader fed it ----
def comm_from_launch_context(cols, names, name_codes):
    from tracekit.loader.linking import comm_from_launch_context as real

    return real(cols, names, name_codes)


def fill_collectives(cols, strings, args, names, name_codes, row_names, named=True):
    from tracekit.loader.linking import CollRecords
    from tracekit.loader.linking import fill_collectives as real

    coll = [
        i
        for i, a in enumerate(args)
        if a is not None
        and (
            a.coll_name is not None
            or a.in_nelems is not None
            or a.in_size is not None
            or (a.input_dims is not None and HOST_COMM_OP.match(row_names[i]) is not None)
        )
    ]
    records = CollRecords()
    for i in coll:  # one row at a time, the straightforward way
        records.add([i], [args[i]], [row_names[i]])
    return real(cols, strings, records, names, name_codes, world_group=not named)


def reference_load(path: str, rules=None):
    """(EventTable, RankInfo) of one trace file the pre-optimisation way (no cache)."""
    from tracekit.loader.decode import DEFAULT_MAX_BYTES, decode, exact_times_ns, needs_exact_times, read_bytes

    data = read_bytes(path, DEFAULT_MAX_BYTES)
    trace, warnings = decode(data, path)
    exact = exact_times_ns(data) if needs_exact_times(trace) else None
    return build_table(trace, path, rules or RuleSet(), warnings, exact)


def _tid(t):
    """PyTorch 1.8's string tids ("stream 7", "456") as their numbers, written apart from the loader's regex."""
    if isinstance(t, str):
        text = t.strip()
        text = text[len("stream ") :] if text.startswith("stream ") else text
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None
    return t
