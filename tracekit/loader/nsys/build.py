"""One process of an export -> the EventTable the Kineto loader builds for a rank.

The rows arrive with Kineto's categories (``kernel``, ``gpu_memcpy``, ``cuda_sync``, ``cuda_runtime``,
``user_annotation``, ``cpu_op``), so the loader's own rules decide their kinds (``kinds.classify_kinds``:
communication by the shipped name rules, ``ProfilerStep#N``, host collective ops), their steps (the window around
a host event, the launch's step for device work) and their collective columns (``linking.fill_collectives``:
each communication kernel takes the op, bytes and group of the host collective op around its launch -- here the
NCCL API range). Device rows have the device as pid, as Kineto writes them; host rows the OS pid and thread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model.columns import Sparse, compact
from ...model.events import ABSENT, COLUMNS, EventTable
from ...model.events import EventKind as K
from ..classify import RuleSet
from ..columnar import _LINK_READS, _SPARSE_CANDIDATES, _spread
from ..kinds import classify_kinds, steps_of_windows
from ..linking import CollRecords, comm_from_launch_context, fill_collectives
from .activities import Rows
from .steps import iteration_windows
from .strings import merge

_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")
_TEXT_COLUMNS = {"op": "coll_op_id", "pg_name": "pg_name_id", "dtype": "dtype_id"}
_INT_COLUMNS = ("group_size", "in_bytes", "out_bytes", "src_rank", "dst_rank")
# the columns fill_collectives writes (the op, group, sizes, ranks of a collective)
_COLLECTIVE_COLUMNS = (
    "coll_op_id",
    "pg_name_id",
    "pg_desc_id",
    "pg_ranks_id",
    "group_size",
    "dtype_id",
    "in_nelems",
    "out_nelems",
    "in_bytes",
    "out_bytes",
    "in_split_id",
    "out_split_id",
    "seq",
    "src_rank",
    "dst_rank",
)


@dataclass
class Part:
    """The rows of one kind for one process, and what they add (collective columns of the NCCL ranges)."""

    rows: Rows
    device: bool
    coll: dict | None = None


def build(parts: list[Part], rules: RuleSet, base_ns: int, warnings: list[str]) -> EventTable:
    parts = [p for p in parts if len(p.rows)]
    codes, names = merge([(p.rows.name, p.rows.names) for p in parts])
    cat_codes, cats = merge([(p.rows.cat, p.rows.cats) for p in parts])
    n = sum(len(p.rows) for p in parts)
    if n == 0:
        return EventTable.empty()
    col = {k: _cat(parts, k) for k in ("ts", "te", "corr", "bytes", "device", "stream", "tid", "pid")}
    is_dev = np.concatenate([np.full(len(p.rows), p.device) for p in parts])
    name_code, cat_code = np.concatenate(codes), np.concatenate(cat_codes)
    del codes, cat_codes
    at, coll = _coll_columns(parts, n, col["ts"])  # the NCCL ranges' rows (in time order) and their fields
    for p in parts:  # the parts' columns are in ``col`` now: let them go (the largest arrays of the load)
        p.rows.cols.clear()
    order = np.argsort(col["ts"], kind="stable")
    for k in col:  # one column at a time, each old one freed as it is replaced
        col[k] = col[k][order]
    is_dev, name_code, cat_code = is_dev[order], name_code[order], cat_code[order]
    del order
    name_code_safe = np.where(name_code < 0, len(names), name_code)
    names_x = [*names, ""]
    has_coll = np.zeros(n, bool)
    has_coll[at[coll["op"] != None]] = True  # noqa: E711 -- elementwise on an object array
    nccl = np.zeros(n, bool)
    nccl[at] = True
    kind, is_device = classify_kinds(cat_code, cats, name_code_safe, names_x, rules, has_coll)
    kind[has_coll & ~is_device] = K.CPU_COMM_OP  # an NCCL API range: the host side of its collective
    strings: dict[str, int] = {}
    name_map = np.array([strings.setdefault(s, len(strings)) for s in names] + [ABSENT], np.int32)
    cat_map = np.array([strings.setdefault(s, len(strings)) for s in cats] + [ABSENT], np.int32)
    ts, te = col.pop("ts"), col.pop("te")
    te -= ts  # in place: the duration
    ts += np.int64(base_ns)
    device, stream, tid = col.pop("device"), col.pop("stream"), col.pop("tid")
    cols: dict[str, np.ndarray] = {
        "ts_ns": ts,
        "dur_ns": np.maximum(te, 0, out=te),
        "kind": kind.astype(np.int8),
        "device": np.where(is_device, np.clip(device, -1, 2**15 - 1), -1).astype(np.int16),
        "pid": np.where(is_device, device, col.pop("pid")),
        "stream": np.where(is_device, stream, tid),
        "name_id": name_map[name_code_safe],
        "cat_id": cat_map[np.where(cat_code < 0, len(cats), cat_code)],
        "correlation": col.pop("corr"),
        "external_id": np.full(n, ABSENT, np.int64),
    }
    del ts, te, device, stream, tid
    cols["step"] = _steps(cols, kind, is_device, name_code_safe, names_x, warnings)
    _launched_by_nccl(cols, nccl & ~is_device, kind)
    comm_from_launch_context(cols, names_x, name_code_safe)
    assumed = _collectives(cols, strings, at, coll, names_x, name_code_safe)
    if assumed:
        warnings.append(
            f"{assumed} collectives name no communicator (no NCCL payloads in the export); they are assumed to run "
            "on the world group and are matched across ranks by their order"
        )
    copies = np.flatnonzero(np.isin(cols["kind"], (K.MEMCPY, K.MEMSET)))
    full: dict[str, np.ndarray | Sparse] = {k: v for k, v in cols.items()}
    full["mem_bytes"] = _spread(col["bytes"][copies], copies, n)
    for k in COLUMNS:
        if k not in full:  # the memory columns of Kineto's [memory] events: absent everywhere
            full[k] = Sparse(n, np.empty(0, np.int32), np.empty(0, COLUMNS[k]))
    ordered = {k: full.pop(k) for k in COLUMNS}
    return EventTable(compact(ordered, _SPARSE_CANDIDATES), tuple(strings))


def _collectives(cols, strings: dict[str, int], at: np.ndarray, coll: dict, names: list[str], name_code) -> int:
    """The collective columns, filled on the rows that can hold them only (as the Kineto builder does): the NCCL
    ranges, communication, syncs and the launches of communication kernels; then spread, sparse, to the table."""
    kind, corr, n = cols["kind"], cols["correlation"], len(cols["kind"])
    mask = np.isin(kind, (K.COMM, K.CPU_COMM_OP, K.SYNC))
    mask[at] = True
    comm_corr = np.unique(corr[(kind == K.COMM) & (corr >= 0)])
    launches = np.flatnonzero(kind == K.RUNTIME)
    if len(comm_corr) and len(launches):
        pos = np.minimum(np.searchsorted(comm_corr, corr[launches]), len(comm_corr) - 1)
        mask[launches[comm_corr[pos] == corr[launches]]] = True
    rows = np.flatnonzero(mask)
    sub = {k: cols[k][rows] for k in _LINK_READS}
    sub.update((k, np.full(len(rows), ABSENT, COLUMNS[k])) for k in _COLLECTIVE_COLUMNS)
    mine = np.searchsorted(rows, at)
    for key, out in _TEXT_COLUMNS.items():
        sub[out][mine] = [strings.setdefault(v, len(strings)) if v else ABSENT for v in coll[key]]
    for key in _INT_COLUMNS:
        sub[key][mine] = np.where(coll[key] >= 0, coll[key], ABSENT)
    no_groups = not (coll["pg_name"] != None).any()  # noqa: E711 -- elementwise on an object array
    assumed = fill_collectives(sub, strings, CollRecords(), names, name_code[rows], world_group=no_groups)
    cols["step"][rows] = sub["step"]
    for k in _COLLECTIVE_COLUMNS:
        cols[k] = _spread(sub.pop(k), rows, n)
    return assumed


def _cat(parts: list[Part], key: str) -> np.ndarray:
    out = []
    for p in parts:
        c = p.rows.cols
        v = c.get(key)
        if v is None and key == "pid":
            from .activities import device_pid_of

            v = device_pid_of(c["proc"])
        out.append(v if v is not None else np.full(len(p.rows), ABSENT, np.int64))
    return np.concatenate(out).astype(np.int64)


def _coll_columns(parts: list[Part], n: int, ts: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(the rows, in time order, of the NCCL ranges, their collective fields): only those rows carry any."""
    rows, fields = [], []
    base = 0
    for p in parts:
        if p.coll is not None:
            rows.append(base + p.coll["rows"])
            fields.append(p.coll)
        base += len(p.rows)
    keys = (*_TEXT_COLUMNS, *_INT_COLUMNS)
    if not rows:
        return np.empty(0, np.int64), {k: np.empty(0, object if k in _TEXT_COLUMNS else np.int64) for k in keys}
    pre = np.concatenate(rows)  # positions before the sort by time -> after: the stable rank of each
    order = np.argsort(ts, kind="stable")
    where = np.empty(n, np.int64)
    where[order] = np.arange(n)
    at = where[pre]
    del where, order
    sort = np.argsort(at, kind="stable")
    return at[sort], {k: np.concatenate([f[k] for f in fields])[sort] for k in keys}


def _steps(cols, kind, is_device, name_code, names, warnings: list[str]) -> np.ndarray:
    """ProfilerStep#N when the run recorded it (classify_kinds made those rows STEP), else an iteration family."""
    srows = np.flatnonzero(kind == K.STEP)
    if len(srows):
        numbers = np.array([int(names[c].rsplit("#", 1)[1]) for c in name_code[srows]], np.int32)
    else:
        srows, numbers, label = iteration_windows(kind, is_device, name_code, names)
        if len(srows):
            kind[srows] = K.STEP
            cols["kind"][srows] = K.STEP
            warnings.append(f"steps from the NVTX ranges named '{label}' ({len(srows)} ranges; no ProfilerStep#N in the export)")
    return steps_of_windows(cols, kind, srows, numbers, is_device)


def _launched_by_nccl(cols, nccl_rows: np.ndarray, kind: np.ndarray) -> None:
    """Kernels and copies launched from inside an NCCL API range are NCCL's (its copy-engine and symmetric-memory
    collectives run as copies with no kernel name to go by): communication. NCCL's API calls no user code, so
    the innermost NCCL range around a launch is its issuer."""
    hosts = np.flatnonzero(nccl_rows)
    corr = cols["correlation"]
    rt = np.flatnonzero((kind == K.RUNTIME) & (corr >= 0))
    dev = np.flatnonzero(((kind == K.KERNEL) | (kind == K.MEMCPY)) & (cols["device"] >= 0) & (corr >= 0))
    if not (len(hosts) and len(rt) and len(dev)):
        return
    rt = rt[np.argsort(corr[rt], kind="stable")]
    pos = np.clip(np.searchsorted(corr[rt], corr[dev]), 0, len(rt) - 1)
    hit = corr[rt[pos]] == corr[dev]
    dev, launch = dev[hit], rt[pos[hit]]
    ts, end, tid = cols["ts_ns"], cols["ts_ns"] + cols["dur_ns"], cols["stream"]
    key_h = tid[hosts]
    order = np.lexsort((ts[hosts], key_h))
    hosts, key_h = hosts[order], key_h[order]
    # the latest NCCL range on the launch's thread that started before the launch, and whether it is still open
    lo = int(min(ts[hosts].min(), ts[launch].min()))
    span = int(max(ts[hosts].max(), ts[launch].max())) - lo + 1
    thread_codes, codes = np.unique(np.concatenate([key_h, tid[launch]]), return_inverse=True)
    hk = codes[: len(hosts)] * span + (ts[hosts] - lo)
    lk = codes[len(hosts) :] * span + (ts[launch] - lo)
    idx = np.searchsorted(hk, lk, side="right") - 1
    ok = idx >= 0
    ok[ok] = (codes[: len(hosts)][idx[ok]] == codes[len(hosts) :][ok]) & (end[hosts[idx[ok]]] >= ts[launch[ok]])
    cols["kind"][dev[ok]] = K.COMM
    kind[dev[ok]] = K.COMM
