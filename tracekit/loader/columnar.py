"""Decoded events -> columnar EventTable + RankInfo. The only code that knows Kineto's event semantics.

Events arrive in pieces (a few MiB of JSON each, see ``stream.EventStream``); each piece is reduced at once to
numpy columns and a handful of Python objects (the args of collective events), then dropped, so memory holds
the columns rather than millions of structs. Everything that needs the whole trace (classification of the
unique names, step assignment, correlation joins, collective linking) runs once on the joined columns.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..model.events import ABSENT, COLUMNS, EventTable
from ..model.events import EventKind as K
from ..model.traceset import RankInfo
from .classify import HOST_COMM_OP, RuleSet
from .decode import Trace
from .kinds import MEMCPY_CATS, assign_steps, classify_kinds
from .linking import comm_from_launch_context, fill_collectives
from .rankinfo import Facts, rank_info

_DROP_CATS = {"Trace", "python_function"}
_MEM_CATS = {"cpu_instant_event"}  # kind MEMORY; nothing else becomes MEMORY
_COPY_CATS = MEMCPY_CATS  # kinds MEMCPY / MEMSET, every generation
_EXACT_LIMIT = 2**53 / 1000.0
_PARTS = ("ts", "dur", "pid", "tid", "correlation", "external", "dev_arg", "has_coll", "name", "cat",
          "mem_bytes", "mem_total", "mem_reserved", "mem_addr", "mem_device")


class TableBuilder:
    """Feed pieces of ``traceEvents`` in file order with ``add``; ``finish`` returns (EventTable, RankInfo)."""

    def __init__(self, rules: RuleSet | None = None):
        self.rules = rules  # used by finish only: a piece's builder in a worker needs none
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in _PARTS}
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.coll_args: dict[int, object] = {}  # row -> Args of rows carrying collective metadata
        self.facts = Facts()
        self.host_comm: dict[str, bool] = {}  # name -> a host op that issues a collective
        self.rows = 0
        self.n_bad = 0
        self.trailer_reached = False  # a metadata event follows the last activity (Kineto writes them last)
        self.rounded = False  # ns-resolution epoch timestamps read as float µs (a truncated file)
        self.saw_activity = False  # for absorb: whether trailer_reached was set by an activity of this builder

    def absorb(self, other: TableBuilder) -> None:
        """Append what ``other`` built from the events that follow this builder's in the file (a split trace's
        next piece, built in another process): the same state one builder fed both pieces in order would have."""
        remap = {"name": _remap(self.names, other.names), "cat": _remap(self.cats, other.cats)}
        for key, parts in other.parts.items():
            self.parts[key] += [remap[key][p] for p in parts] if key in remap else parts
        self.coll_args.update((self.rows + r, a) for r, a in other.coll_args.items())
        f, g = self.facts, other.facts
        f.thread_names.update(g.thread_names)
        f.flow_cats |= g.flow_cats
        f.begin_end += g.begin_end
        f.first_ts += g.first_ts[:1000 - len(f.first_ts)]
        f.msg_style = f.msg_style or g.msg_style
        self.host_comm.update(other.host_comm)
        if other.saw_activity:
            self.trailer_reached, self.saw_activity = other.trailer_reached, True
        elif other.trailer_reached and (self.rows or other.rows):
            self.trailer_reached = True
        self.rows += other.rows
        self.n_bad += other.n_bad

    def needs_exact(self, events) -> bool:
        """True when float64 µs cannot hold some timestamp of ``events`` to the ns (see decode)."""
        t = _floats([e.ts for e in events])
        return bool(np.any((np.abs(t) >= _EXACT_LIMIT) & (t != np.floor(t))))

    def add(self, events, exact: tuple[list, list] | None = None) -> None:
        ph_codes, phs = _factorize([e.ph for e in events])
        cat_codes, cats = _factorize([e.cat for e in events])
        keep_mask = _is(ph_codes, phs, "X") & ~_in(cat_codes, cats, _DROP_CATS)
        inst = np.flatnonzero(_is(ph_codes, phs, "i"))
        keep_mask[inst[[events[j].name == "[memory]" for j in inst.tolist()]]] = True
        self._facts(events, ph_codes, phs, cat_codes, cats)
        self._note_trailer(ph_codes, phs, cat_codes, cats)
        keep = np.flatnonzero(keep_mask).tolist()
        kept = [events[i] for i in keep]
        self.facts.note_kept(kept)
        ts = _floats([e.ts for e in kept])
        dur = _floats([e.dur for e in kept])
        is_instant = _is(ph_codes, phs, "i")[keep]
        dur = np.where(is_instant & np.isnan(dur), 0.0, dur)
        good = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & (np.abs(ts) < 9e15) & (dur < 9e15)
        bad = int(len(good) - np.count_nonzero(good))
        kept_cats = cat_codes[keep]
        if exact is not None:
            ts_ns = _ints([exact[0][i] for i in keep])[good]
            dur_ns = _ints([exact[1][i] for i in keep])[good]
            dur_ns[is_instant[good] & (dur_ns < 0)] = 0
        if bad:
            self.n_bad += bad
            kept = [e for e, g in zip(kept, good) if g]
            ts, dur, kept_cats = ts[good], dur[good], kept_cats[good]
        if exact is None:
            ts_ns, dur_ns = _to_ns(ts), np.rint(dur * 1000.0).astype(np.int64)
        self._columns(kept, ts_ns, dur_ns, kept_cats, cats)

    def _note_trailer(self, ph_codes, phs, cat_codes, cats) -> None:
        activity = np.flatnonzero(_is(ph_codes, phs, "X") & ~_in(cat_codes, cats, {"Trace"}))
        meta = np.flatnonzero(_is(ph_codes, phs, "M"))
        if len(activity):
            self.trailer_reached = bool(len(meta) and meta[-1] > activity[-1])
            self.saw_activity = True
        elif len(meta) and self.rows:
            self.trailer_reached = True

    def _facts(self, events, ph_codes, phs, cat_codes, cats) -> None:
        f = self.facts
        for j in np.flatnonzero(_is(ph_codes, phs, "M")).tolist():
            e = events[j]
            if e.name == "thread_name" and e.args is not None and e.args.name:
                f.thread_names[(e.pid, e.tid)] = e.args.name
        f.begin_end += int(np.count_nonzero(_is(ph_codes, phs, "B") | _is(ph_codes, phs, "E")))
        flows = _is(ph_codes, phs, "s") | _is(ph_codes, phs, "f")
        f.flow_cats.update(cats[c] for c in np.unique(cat_codes[flows]).tolist())

    def _columns(self, kept, ts_ns, dur_ns, cat_codes, cats) -> None:
        p, n = self.parts, len(kept)
        p["ts"].append(ts_ns)
        p["dur"].append(dur_ns)
        p["name"].append(_recode(self.names, *_factorize([e.name for e in kept])))
        p["cat"].append(_recode(self.cats, cat_codes, cats))
        p["pid"].append(_ints([e.pid for e in kept]))
        p["tid"].append(_ints([e.tid for e in kept]))
        args = [e.args for e in kept]
        p["correlation"].append(_ints([a.correlation if a is not None else -1 for a in args]))
        p["external"].append(_ints([a.external_id if a is not None else -1 for a in args]))
        p["dev_arg"].append(_ints([a.device if a is not None else -1 for a in args]))
        coll = [i for i, a in enumerate(args) if a is not None and (
            a.coll_name is not None or a.in_nelems is not None or a.in_size is not None
            or (a.input_dims is not None and self._issues_collective(kept[i].name)))]
        has_coll = np.zeros(n, dtype=bool)
        has_coll[[i for i in coll if args[i].coll_name is not None]] = True
        p["has_coll"].append(has_coll)
        for i in coll:
            self.coll_args[self.rows + i] = args[i]
        mem_bytes, mem_total = np.full(n, ABSENT, np.int64), np.full(n, ABSENT, np.int64)
        mem = np.flatnonzero(_in(cat_codes, cats, _MEM_CATS)).tolist()
        cp = np.flatnonzero(_in(cat_codes, cats, _COPY_CATS)).tolist()
        mem_bytes[mem] = _ints([args[i].mem_bytes if args[i] is not None else None for i in mem])
        mem_total[mem] = _ints([args[i].mem_total if args[i] is not None else None for i in mem])
        mem_bytes[cp] = _ints([args[i].copy_bytes if args[i] is not None else None for i in cp])
        p["mem_bytes"].append(mem_bytes)
        p["mem_total"].append(mem_total)
        for key, col in memory_columns(n, mem, args).items():
            p[key].append(col)
        self.rows += n

    def _issues_collective(self, name: str) -> bool:
        hit = self.host_comm.get(name)
        if hit is None:
            hit = self.host_comm[name] = HOST_COMM_OP.match(name) is not None
        return hit

    def finish(self, trace: Trace, path: str, warnings: list[str]) -> tuple[EventTable, RankInfo]:
        di = trace.distributedInfo
        named = bool(di is not None and di.pg_config)
        table, assumed = self._table(int(trace.baseTimeNanoseconds or 0), named)
        if assumed:
            warnings.append(f"{path}: the trace names no process groups (distributedInfo without pg_config); "
                            f"{assumed} collectives without a group are assumed to run on the world group "
                            "(default_pg) and are matched across ranks by their order")
        if self.n_bad:
            warnings.append(f"{path}: dropped {self.n_bad} events with missing, non-finite or negative "
                            "times/durations")
        if len(table) and not (table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET).any()
                               or table.mask_kind(K.STEP).any() or table.mask_kind(K.CPU_OP).any()):
            warnings.append(f"{path}: no kernels, operators or steps in the trace; was the profiler active?")
        info = rank_info(trace, path, table, self.facts, warnings)
        if trace.truncated:  # events are kept in file order: the last row is the last event before the cut
            last = int(table["ts_ns"][-1]) if len(table) and not self.rounded else -1  # -1: nothing is sure
            info = replace(info, truncated=True, last_complete_ns=last,
                           activities_whole=self.trailer_reached and not self.rounded)
        return table, info

    def _table(self, base_ns: int, named_groups: bool = True) -> tuple[EventTable, int]:
        p = {k: _join(v, k) for k, v in self.parts.items()}
        self.parts = {}
        strings: dict[str, int] = {}
        names, cats = list(self.names), list(self.cats)
        name_map = _intern(strings, names)
        cat_map = _intern(strings, cats)
        name_codes, cat_codes = p["name"], p["cat"]
        kind, is_device = classify_kinds(cat_codes, cats, name_codes, names, self.rules or RuleSet(), p["has_coll"],
                                         p["pid"])
        tid = p["tid"]
        gloo = {t for (_, t), nm in self.facts.thread_names.items() if "gloo" in str(nm)}
        gloo |= set(np.unique(tid[(kind == K.COMM) & ~is_device]).tolist())
        on_gloo = np.isin(tid, np.array(sorted(t for t in gloo if isinstance(t, int)), dtype=np.int64))
        kind[(kind == K.CPU_OP) & on_gloo] = K.CPU_COMM_OP
        dev_arg, pid = p["dev_arg"], p["pid"]
        device = np.where(is_device, np.where(dev_arg >= 0, dev_arg, pid), -1)
        device = np.where((device >= -1) & (device < 2**15), device, -1).astype(np.int16)  # no int16 wrap-around
        n = len(kind)
        cols = {k: np.full(n, ABSENT, dtype=d) for k, d in COLUMNS.items() if k not in _OWN}
        cols.update(ts_ns=p["ts"] + np.int64(base_ns), dur_ns=p["dur"], kind=kind.astype(np.int8), device=device,
                    pid=pid, stream=tid, name_id=name_map[name_codes], cat_id=cat_map[cat_codes],
                    correlation=p["correlation"], external_id=p["external"], mem_bytes=p["mem_bytes"],
                    mem_total=p["mem_total"], mem_reserved=p["mem_reserved"], mem_addr=p["mem_addr"],
                    mem_device=p["mem_device"].astype(np.int16))
        cols["step"] = assign_steps(cols, kind, names, name_codes, is_device)
        comm_from_launch_context(cols, names, name_codes)
        assumed = fill_collectives(cols, strings, self.coll_args, names, name_codes, world_group=not named_groups)
        return EventTable({k: cols[k] for k in COLUMNS}, tuple(strings)), assumed


_OWN = {"ts_ns", "dur_ns", "kind", "device", "pid", "stream", "name_id", "cat_id", "correlation", "external_id",
        "mem_bytes", "mem_total", "mem_reserved", "mem_addr", "mem_device", "step"}
_JOIN_DTYPES = {"ts": np.int64, "dur": np.int64, "name": np.int32, "cat": np.int32, "has_coll": bool}


def _join(parts: list[np.ndarray], key: str) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype=_JOIN_DTYPES.get(key, np.int64))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def memory_columns(n: int, mem: list[int], args: list) -> dict[str, np.ndarray]:
    """Total Reserved, Addr and the device (``model.events.memory_device_code``) of the [memory] rows ``mem``."""
    a = [args[i] for i in mem]
    reserved, addr = np.full(n, ABSENT, np.int64), np.full(n, ABSENT, np.int64)
    reserved[mem] = _ints([x.mem_reserved if x is not None else None for x in a])
    addr[mem] = _ints([x.mem_addr if x is not None else None for x in a])
    kind = _ints([x.mem_dev_type if x is not None else None for x in a])
    dev = _ints([x.mem_dev_id if x is not None else None for x in a])
    device = np.full(n, ABSENT, np.int64)
    ok = (kind >= 0) & (kind < 127) & (dev >= -1) & (dev < 255)
    device[np.asarray(mem, dtype=np.int64)[ok]] = kind[ok] * 256 + dev[ok] + 1
    return {"mem_reserved": reserved, "mem_addr": addr, "mem_device": device}


def _remap(table: dict, uniques: dict) -> np.ndarray:
    """Codes into ``uniques`` (a builder's names, in first-appearance order) -> codes into ``table``."""
    return np.array([table.setdefault(u, len(table)) for u in uniques] or [0], dtype=np.int32)


def _factorize(values: list) -> tuple[np.ndarray, list]:
    """(codes, uniques in first-appearance order); pandas does the hashing in C."""
    if not values:
        return np.empty(0, np.intp), []
    codes, uniques = pd.factorize(np.array(values, dtype=object))
    return codes, list(uniques)


def _is(codes: np.ndarray, uniques: list, value) -> np.ndarray:
    return codes == uniques.index(value) if value in uniques else np.zeros(len(codes), dtype=bool)


def _in(codes: np.ndarray, uniques: list, values: set) -> np.ndarray:
    return np.array([u in values for u in uniques] or [False], dtype=bool)[codes]


def _recode(table: dict, codes: np.ndarray, uniques: list) -> np.ndarray:
    """Local codes -> codes into ``table`` (extended in the order the values first appear in ``codes``)."""
    if not len(codes):
        return np.empty(0, np.int32)
    present, first = np.unique(codes, return_index=True)
    remap = np.zeros(len(uniques), dtype=np.int32)
    for c in present[np.argsort(first, kind="stable")].tolist():
        remap[c] = table.setdefault(uniques[c], len(table))
    return remap[codes]


def _floats(values: list) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in values],
                        dtype=np.float64)


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


def _to_ns(ts_us: np.ndarray) -> np.ndarray:
    """µs floats -> int64 ns without losing the integer part to float rounding."""
    whole = np.floor(ts_us)
    return whole.astype(np.int64) * 1000 + np.rint((ts_us - whole) * 1000.0).astype(np.int64)


def _intern(strings: dict[str, int], uniques) -> np.ndarray:
    return np.array([strings.setdefault(str(u), len(strings)) for u in uniques] or [0], dtype=np.int32)


def build_table(trace: Trace, path: str, rules: RuleSet, warnings: list[str],
                exact: tuple[list, list] | None = None) -> tuple[EventTable, RankInfo]:
    """The whole-file path: ``exact`` is (ts_ns, dur_ns) per trace event decoded exactly, for ns-resolution
    epoch timestamps."""
    events = trace.traceEvents or []
    if exact is not None and len(exact[0]) != len(events):
        exact = None
    builder = TableBuilder(rules)
    builder.add(events, exact)
    if trace.truncated and exact is None and builder.needs_exact(events):
        builder.rounded = True  # the exact ns pass needs the whole JSON text: no figure can be trusted to the ns
    return builder.finish(trace, path, warnings)
