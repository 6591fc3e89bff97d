"""Decoded events -> columnar EventTable + RankInfo. The only code that knows Kineto's event semantics.

Events arrive in pieces (a few MiB of JSON each, see ``stream.EventStream``); each piece is reduced at once to
numpy columns and a handful of Python objects (the args of collective events), then dropped, so memory holds
the columns rather than millions of structs. Everything that needs the whole trace (classification of the
unique names, step assignment, correlation joins, collective linking) runs once on the joined columns.
"""

from __future__ import annotations

import mmap
from dataclasses import replace

import numpy as np
import pandas as pd

from ..model.columns import SPARSE_SHARE, Sparse, compact
from ..model.dropped import UNKNOWN_NS, DroppedEvents
from ..model.events import ABSENT, COLUMNS, EventTable
from ..model.events import EventKind as K
from ..model.traceset import RankInfo
from .classify import HOST_COMM_OP, RuleSet
from .decode import Trace
from .kinds import MEMCPY_CATS, assign_steps, classify_kinds, int_or_absent, normalise_step_names, thread_ids
from .linking import (
    CLOCK_NOISE_NS,
    CollRecords,
    break_implausible_links,
    comm_from_launch_context,
    fill_collectives,
    unknown_dtype_warnings,
)
from .rankinfo import Facts, rank_info
from .structs import Args

_DROP_CATS = {"Trace", "python_function"}
_MEM_CATS = {"cpu_instant_event"}  # kind MEMORY; nothing else becomes MEMORY
_COPY_CATS = MEMCPY_CATS  # kinds MEMCPY / MEMSET, every generation
_EXACT_LIMIT = 2**53 / 1000.0
# the columns built piece by piece, appended in place (see _Column); the memory ones are sparse (see _SparseParts)
_PARTS = {
    "ts": np.int64,
    "dur": np.int64,
    "pid": np.int64,
    "tid": np.int64,
    "correlation": np.int64,
    "external": np.int64,
    "dev_arg": np.int64,
    "has_coll": np.bool_,
    "name": np.int32,
    "cat": np.int32,
}
_NO_ARGS = Args()  # an event without args: every field its default (never changed)
# Chrome's trace-event phases other than X and B/E: read for facts (M, s/f) or deliberately not events tracekit
# measures (instants, counters, async, samples, objects, marks). An event with another ph, or none, is malformed.
_OTHER_PHASES = frozenset("iIsftMCbneSTpFPNODRVvc()")
_SPARSE_PARTS = ("mem_bytes", "mem_total", "mem_reserved", "mem_addr", "mem_device")


class TableBuilder:
    """Feed pieces of ``traceEvents`` in file order with ``add``; ``finish`` returns (EventTable, RankInfo)."""

    def __init__(self, rules: RuleSet | None = None):
        self.rules = rules  # used by finish only: a piece's builder in a worker needs none
        self.parts: dict[str, _Column] = {k: _Column(d) for k, d in _PARTS.items()}
        self.sparse: dict[str, _SparseParts] = {k: _SparseParts() for k in _SPARSE_PARTS}
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.coll = CollRecords()  # the rows carrying collective metadata, and what it says
        self.facts = Facts()
        self.host_comm: dict[str, bool] = {}  # name -> a host op that issues a collective
        self.rows = 0
        self.n_bad = 0
        self.trailer_reached = False  # a metadata event follows the last activity (Kineto writes them last)
        self.rounded = False  # ns-resolution epoch timestamps read as float µs (a truncated file)
        self.saw_activity = False  # for absorb: whether trailer_reached was set by an activity of this builder
        self.drops = DroppedEvents()  # every event dropped here, once (starts before baseTimeNanoseconds is added)
        self.n_malformed_ph = 0
        self.links = (0, 0, False)  # (impossible launch links, links examined, ids unusable): break_implausible_links
        self.step_notes: list[str] = []  # step names normalised or only looking like one (kinds.normalise_step_names)

    def absorb(self, other: TableBuilder) -> None:
        """Append what ``other`` built from the events that follow this builder's in the file (a split trace's
        next piece, built in another process): the same state one builder fed both pieces in order would have."""
        remap = {"name": _remap(self.names, other.names), "cat": _remap(self.cats, other.cats)}
        for key, col in other.parts.items():
            self.parts[key].append(remap[key][col.view()] if key in remap else col.view())
        for key, sp in other.sparse.items():
            self.sparse[key].extend(sp, self.rows)
        self.coll.extend(other.coll, self.rows)
        f, g = self.facts, other.facts
        f.thread_names.update(g.thread_names)
        f.flow_cats |= g.flow_cats
        f.begin_end += g.begin_end
        f.first_ts += g.first_ts[: 1000 - len(f.first_ts)]
        f.msg_style = f.msg_style or g.msg_style
        self.host_comm.update(other.host_comm)
        if other.saw_activity:
            self.trailer_reached, self.saw_activity = other.trailer_reached, True
        elif other.trailer_reached and (self.rows or other.rows):
            self.trailer_reached = True
        self.rows += other.rows
        self.n_bad += other.n_bad
        self.n_malformed_ph += other.n_malformed_ph
        self.drops = self.drops.merged(other.drops)

    def take_arrays(self) -> dict[str, np.ndarray]:
        """The builder's column arrays, removed from it (to travel apart: ``handoff``); ``give_arrays`` puts them
        back."""
        arrays = {f"p.{k}": c.view() for k, c in self.parts.items()}
        for k, sp in self.sparse.items():
            arrays[f"r.{k}"], arrays[f"v.{k}"] = sp.joined()
        arrays.update((f"c.{k}", v) for k, v in self.coll.arrays().items())
        self.parts, self.sparse = {}, {}
        # the records' texts stay (they go back with the builder); their arrays travel with the columns only
        self.coll.set_arrays({"rows": np.empty(0, np.int64), "codes": np.empty(0, np.int32), "ints": np.empty(0, np.int64)})
        return arrays

    def give_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.parts = {k: _Column.of(arrays[f"p.{k}"]) for k in _PARTS}
        self.coll.set_arrays({k: arrays[f"c.{k}"] for k in ("rows", "codes", "ints")})  # copied: small
        # copied: small, and a view would keep the whole handed-off file mapped until finish
        self.sparse = {k: _SparseParts.of(np.array(arrays[f"r.{k}"]), np.array(arrays[f"v.{k}"])) for k in _SPARSE_PARTS}

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` rows in every column (pages not written stay unbacked: an estimate too high costs
        address space only), so that absorbing the pieces copies each value once instead of growing by doubling."""
        for col in self.parts.values():
            col.reserve(rows)

    def needs_exact(self, events) -> bool:
        """True when float64 µs cannot hold some timestamp of ``events`` to the ns (see decode)."""
        return _inexact(_floats([e.ts for e in events]))

    def add(self, events, exact: tuple[list, list] | None = None, refuse_inexact: bool = False) -> bool:
        """Append ``events``' rows. ``refuse_inexact``: add nothing and return False when some timestamp needs the
        exact ns pass (``needs_exact``), checked on the one pass over the times that the rows take theirs from."""
        ts_all = _floats([e.ts for e in events])
        if refuse_inexact and _inexact(ts_all):
            return False
        ph_codes, phs = _factorize([e.ph for e in events])
        cat_codes, cats = _factorize([e.cat for e in events])
        keep_mask = _is(ph_codes, phs, "X") & ~_in(cat_codes, cats, _DROP_CATS)
        inst = np.flatnonzero(_is(ph_codes, phs, "i"))
        keep_mask[inst[[events[j].name == "[memory]" for j in inst.tolist()]]] = True
        self._facts(events, ph_codes, phs, cat_codes, cats)
        self._note_trailer(ph_codes, phs, cat_codes, cats)
        self._note_unread(events, ts_all, ph_codes, phs)
        keep_at = np.flatnonzero(keep_mask)
        keep = keep_at.tolist()
        kept = [events[i] for i in keep]
        self.facts.note_kept(kept)
        ts = ts_all[keep_at]
        del ts_all
        dur = _floats([e.dur for e in kept])
        is_instant = _is(ph_codes, phs, "i")[keep_at]
        dur = np.where(is_instant & np.isnan(dur), 0.0, dur)
        good = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & (np.abs(ts) < 9e15) & (dur < 9e15)
        bad = int(len(good) - np.count_nonzero(good))
        kept_cats = cat_codes[keep_at]
        if exact is not None:
            ts_ns = _ints([exact[0][i] for i in keep])[good]
            dur_ns = _ints([exact[1][i] for i in keep])[good]
            dur_ns[is_instant[good] & (dur_ns < 0)] = 0
        if bad:
            self.n_bad += bad
            lost = np.flatnonzero(~good)
            self._drop("times", [kept[i] for i in lost.tolist()], ts[lost])
            kept = [e for e, g in zip(kept, good) if g]
            ts, dur, kept_cats = ts[good], dur[good], kept_cats[good]
        if exact is None:
            ts_ns, dur_ns = _to_ns(ts), np.rint(dur * 1000.0).astype(np.int64)
        self._columns(kept, ts_ns, dur_ns, kept_cats, cats)
        return True

    def _note_unread(self, events, ts_all: np.ndarray, ph_codes, phs) -> None:
        """Count the events no rule reads: without a ``ph`` or with one Chrome does not define (malformed), and
        begin/end pairs (``B``/``E``, which tracekit does not pair up)."""
        bad_ph = np.array([p not in _OTHER_PHASES and p not in ("X", "B", "E") for p in phs] or [False], dtype=bool)
        for reason, mask in (("malformed", bad_ph[ph_codes]), ("begin_end", _is(ph_codes, phs, "B") | _is(ph_codes, phs, "E"))):
            rows = np.flatnonzero(mask)
            if len(rows):
                self.n_malformed_ph += len(rows) if reason == "malformed" else 0
                self._drop(reason, [events[i] for i in rows.tolist()], ts_all[rows])

    def _drop(self, reason: str, events: list, ts_us: np.ndarray) -> None:
        """Record ``events`` as dropped for ``reason``: their starts (in ns, UNKNOWN_NS where unusable) and
        correlation ids, so that the steps that lost them are marked incomplete."""
        usable = np.isfinite(ts_us) & (np.abs(ts_us) < 9e15)
        ts_ns = np.full(len(events), UNKNOWN_NS, np.int64)
        ts_ns[usable] = _to_ns(ts_us[usable])
        corr = _ints([(e.args.correlation if e.args is not None else -1) for e in events])
        self.drops = self.drops.plus(reason, len(events), ts_ns.tolist(), corr.tolist())

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
        names = self.names  # code of each name in first-appearance order: one dict pass, no factorize and remap
        p["name"].append(np.array([names.setdefault(e.name, len(names)) for e in kept], np.int32))
        p["cat"].append(_recode(self.cats, cat_codes, cats))
        p["pid"].append(_ints([e.pid for e in kept]))
        p["tid"].append(thread_ids([e.tid for e in kept]))  # "stream 7" (PyTorch 1.8) is stream 7
        args = [e.args or _NO_ARGS for e in kept]  # absent args read as Args' defaults, as they did
        p["correlation"].append(_ints([a.correlation for a in args]))
        p["external"].append(_ints([a.external_id for a in args]))
        p["dev_arg"].append(_ints([a.device for a in args]))
        coll = [
            i
            for i, a in enumerate(args)
            if (
                a.coll_name is not None
                or a.in_nelems is not None
                or a.in_size is not None
                or (a.input_dims is not None and self._issues_collective(kept[i].name))
            )
        ]
        has_coll = np.zeros(n, dtype=bool)
        has_coll[[i for i in coll if args[i].coll_name is not None]] = True
        p["has_coll"].append(has_coll)
        self.coll.add([self.rows + i for i in coll], [args[i] for i in coll], [kept[i].name for i in coll])
        mem = np.flatnonzero(_in(cat_codes, cats, _MEM_CATS))
        cp = np.flatnonzero(_in(cat_codes, cats, _COPY_CATS))
        both = np.union1d(mem, cp)  # a row is either a [memory] event or a copy (their categories differ)
        mem_l, cp_l = mem.tolist(), cp.tolist()
        mem_bytes = np.full(len(both), ABSENT, np.int64)
        mem_bytes[np.searchsorted(both, mem)] = _ints([args[i].mem_bytes for i in mem_l])
        mem_bytes[np.searchsorted(both, cp)] = _ints([args[i].copy_bytes for i in cp_l])
        sp, at = self.sparse, self.rows
        sp["mem_bytes"].add(both, mem_bytes, at)
        sp["mem_total"].add(mem, _ints([args[i].mem_total for i in mem_l]), at)
        for key, col in memory_columns(len(mem), list(range(len(mem))), [args[i] for i in mem_l]).items():
            sp[key].add(mem, col, at)
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
            warnings.append(
                f"{path}: the trace names no process groups (distributedInfo without pg_config); "
                f"{assumed} collectives without a group are assumed to run on the world group "
                "(default_pg) and are matched across ranks by their order"
            )
        warnings += unknown_dtype_warnings(table, path)
        if self.n_bad:
            warnings.append(f"{path}: dropped {self.n_bad} events with missing, non-finite or negative times/durations")
        warnings += _link_warnings(path, *self.links)
        warnings += [f"{path}: {note}" for note in self.step_notes]
        if self.n_malformed_ph:
            warnings.append(
                f"{path}: dropped {self.n_malformed_ph} malformed events without a 'ph' (event phase) or with one the "
                "trace format does not define; the steps they lay in are marked incomplete"
            )
        drops = self.drops
        for ts_us, corr, reason in trace.dropped:  # the events the lenient decode could not convert or cut out
            drops = drops.plus(reason, 1, [_start_ns(ts_us)], [corr])
        if len(table) and not (
            table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET).any()
            or table.mask_kind(K.STEP).any()
            or table.mask_kind(K.CPU_OP).any()
        ):
            warnings.append(f"{path}: no kernels, operators or steps in the trace; was the profiler active?")
        info = replace(
            rank_info(trace, path, table, self.facts, warnings),
            dropped=drops.ordered().shifted(int(trace.baseTimeNanoseconds or 0)),
        )
        if trace.truncated:  # events are kept in file order: the last row is the last event before the cut
            last = int(table["ts_ns"][-1]) if len(table) and not self.rounded else -1  # -1: nothing is sure
            info = replace(
                info, truncated=True, last_complete_ns=last, activities_whole=self.trailer_reached and not self.rounded
            )
        return table, info

    def _collectives(self, cols: dict, strings: dict[str, int], names: list, name_codes: np.ndarray, world_group: bool) -> int:
        """Fill the collective columns (linking.fill_collectives) on the rows that can hold them only: collective
        args, communication, host collective ops, syncs and the runtime calls that may launch a communication
        kernel (for the launch -> kernel join). Every row set fill_collectives selects lies in those rows, so it sees the same
        rows in the same order; the columns it fills are then spread to the whole table, sparse where they are
        absent on most rows (model/columns.py), instead of 15 full columns of -1 at the load's peak."""
        kind, n = cols["kind"], len(cols["kind"])
        can = np.zeros(256, bool)
        can[[K.COMM, K.CPU_COMM_OP, K.SYNC]] = True
        mask = can[kind.view(np.uint8)]
        coll_rows = self.coll.arrays()["rows"]
        mask[coll_rows] = True
        # of the runtime calls only those that may have launched a communication kernel (its correlation): the
        # launch -> kernel join reads no other (a quarter of a trace's rows are launches)
        corr = cols["correlation"]
        comm_corr = np.unique(corr[(kind == K.COMM) & (corr >= 0)])
        launches = np.flatnonzero(kind == K.RUNTIME)
        if len(comm_corr) and len(launches):
            at = np.minimum(np.searchsorted(comm_corr, corr[launches]), len(comm_corr) - 1)
            mask[launches[comm_corr[at] == corr[launches]]] = True
        del launches
        if np.count_nonzero(mask) > n // 2:  # most rows (a communication-heavy trace): the whole table as it is
            return fill_collectives(
                _with_collective_columns(cols, n), strings, self.coll, names, name_codes, world_group, self.rules
            )
        rows = np.flatnonzero(mask)
        del mask
        sub = {k: cols[k][rows] for k in _LINK_READS}
        sub.update((k, np.full(len(rows), ABSENT, COLUMNS[k])) for k in COLUMNS if k not in cols and k not in _OWN)
        records = self.coll.renumbered(np.searchsorted(rows, coll_rows))
        self.coll = CollRecords()
        assumed = fill_collectives(sub, strings, records, names, name_codes[rows], world_group, self.rules)
        cols["step"][rows] = sub["step"]  # gloo spans take the step of the annotation that issued them
        for k in COLUMNS:
            if k not in cols and k not in _OWN:
                cols[k] = _spread(sub.pop(k), rows, n)
        return assumed

    def _table(self, base_ns: int, named_groups: bool = True) -> tuple[EventTable, int]:
        p = {k: c.view() for k, c in self.parts.items()}
        self.parts = {}
        strings: dict[str, int] = {}
        names, self.step_notes = normalise_step_names(list(self.names))
        cats = list(self.cats)
        name_map = _intern(strings, names)
        cat_map = _intern(strings, cats)
        name_codes, cat_codes = p["name"], p["cat"]
        kind, is_device = classify_kinds(cat_codes, cats, name_codes, names, self.rules or RuleSet(), p["has_coll"], p["pid"])
        tid = p["tid"]
        gloo = {t for (_, t), nm in self.facts.thread_names.items() if "gloo" in str(nm)}
        gloo |= set(np.unique(tid[(kind == K.COMM) & ~is_device]).tolist())
        on_gloo = np.isin(tid, np.array(sorted(t for t in gloo if isinstance(t, int)), dtype=np.int64))
        kind[(kind == K.CPU_OP) & on_gloo] = K.CPU_COMM_OP
        dev_arg, pid = p["dev_arg"], p["pid"]
        device = np.where(is_device, np.where(dev_arg >= 0, dev_arg, pid), -1)
        device = np.where((device >= -1) & (device < 2**15), device, -1).astype(np.int16)  # no int16 wrap-around
        n = len(kind)
        ts = p["ts"]
        ts += np.int64(base_ns)  # in place: the builder's buffer becomes the column
        cols = dict(
            ts_ns=ts,
            dur_ns=p["dur"],
            kind=kind.astype(np.int8),
            device=device,
            pid=pid,
            stream=tid,
            name_id=name_map[name_codes],
            cat_id=cat_map[cat_codes],
            correlation=p["correlation"],
            external_id=p["external"],
        )
        del p, cat_codes
        self.links = break_implausible_links(cols, is_device)
        cols["step"] = assign_steps(cols, kind, names, name_codes, is_device)
        comm_from_launch_context(cols, names, name_codes)
        assumed = self._collectives(cols, strings, names, name_codes, not named_groups)
        cols.update((k, sp.column(n, COLUMNS[k])) for k, sp in self.sparse.items())
        self.sparse = {}
        ordered = {k: cols.pop(k) for k in COLUMNS}
        return EventTable(compact(ordered, _SPARSE_CANDIDATES), tuple(strings)), assumed


_OWN = {
    "ts_ns",
    "dur_ns",
    "kind",
    "device",
    "pid",
    "stream",
    "name_id",
    "cat_id",
    "correlation",
    "external_id",
    "mem_bytes",
    "mem_total",
    "mem_reserved",
    "mem_addr",
    "mem_device",
    "step",
}
# the columns that hold -1 on most rows of most traces: the collective and memory ones
_SPARSE_CANDIDATES = tuple(k for k in COLUMNS if k not in _OWN) + _SPARSE_PARTS


class _Column:
    """A column the pieces are appended to in place: each piece is copied once, into place, and the table's column
    is a view of the buffer -- no list of per-piece arrays joined at the end (which held every value twice at the
    load's peak). The buffer doubles (pages not yet written are not resident, so the spare capacity costs address
    space only, and each value is copied about twice in all); from 1 MiB it is an anonymous mapping (``_buffer``)."""

    __slots__ = ("data", "n")

    def __init__(self, dtype):
        self.data, self.n = np.empty(0, dtype), 0

    @classmethod
    def of(cls, values: np.ndarray) -> _Column:
        col = cls(values.dtype)
        col.data, col.n = values, len(values)
        return col

    def reserve(self, rows: int) -> None:
        if rows > len(self.data):
            grown = _buffer(rows, self.data.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown

    def append(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.data):
            grown = _buffer(max(need, 2 * len(self.data), 1 << 16), self.data.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : need] = values
        self.n = need

    def view(self) -> np.ndarray:
        return self.data[: self.n]

    def __getstate__(self):  # a piece's builder goes back from a worker: only the rows, not the spare capacity
        return self.view(), self.n

    def __setstate__(self, state) -> None:
        self.data, self.n = state


def _with_collective_columns(cols: dict, n: int) -> dict:
    cols.update((k, np.full(n, ABSENT, COLUMNS[k])) for k in COLUMNS if k not in cols and k not in _OWN)
    return cols


_LINK_READS = ("kind", "device", "correlation", "ts_ns", "dur_ns", "stream", "step")


def _spread(values: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray | Sparse:
    """The column of ``n`` rows that has ``values`` at ``rows`` (sparse when it is absent on most rows)."""
    has = values != ABSENT
    if np.count_nonzero(has) <= SPARSE_SHARE * n:
        return Sparse(n, rows[has].astype(np.int32 if n < 2**31 else np.int64), values[has])
    out = np.full(n, ABSENT, values.dtype)
    out[rows] = values
    return out


def _buffer(n: int, dtype) -> np.ndarray:
    """``n`` uninitialised values. A big one is mapped on its own: its pages not yet written are not resident, and
    when a grown buffer replaces it the memory goes back to the system at once; from malloc it would stay in the
    heap as a hole below the next, bigger buffer (heap memory is returned from the top only): at 5 M rows the
    outgrown buffers were ~0.3 GB of resident memory nothing used."""
    dtype = np.dtype(dtype)
    if n * dtype.itemsize < _MAPPED_FROM:
        return np.empty(n, dtype)
    return np.frombuffer(mmap.mmap(-1, n * dtype.itemsize), dtype)


_MAPPED_FROM = 1 << 20


class _SparseParts:
    """The rows (of the whole table) and values of a column set on few rows ([memory] and copy events)."""

    __slots__ = ("rows", "values")

    def __init__(self):
        self.rows: list[np.ndarray] = []
        self.values: list[np.ndarray] = []

    def add(self, rows: np.ndarray, values: np.ndarray, offset: int) -> None:
        if len(rows):
            self.rows.append(np.asarray(rows, np.int64) + offset)
            self.values.append(values)

    @classmethod
    def of(cls, rows: np.ndarray, values: np.ndarray) -> _SparseParts:
        sp = cls()
        sp.add(rows, values, 0)
        return sp

    def joined(self) -> tuple[np.ndarray, np.ndarray]:
        rows = np.concatenate(self.rows) if self.rows else np.empty(0, np.int64)
        return rows, np.concatenate(self.values) if self.values else np.empty(0, np.int64)

    def extend(self, other: _SparseParts, offset: int) -> None:
        self.rows += [r + offset for r in other.rows]
        self.values += other.values

    def column(self, n: int, dtype) -> np.ndarray | Sparse:
        rows, values = self.joined()
        keep = values != ABSENT
        if np.count_nonzero(keep) <= SPARSE_SHARE * n:
            return Sparse(n, rows[keep].astype(np.int32 if n < 2**31 else np.int64), values[keep].astype(dtype))
        out = np.full(n, ABSENT, dtype)
        out[rows] = values
        return out


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


def _inexact(t: np.ndarray) -> bool:
    return bool(np.any((np.abs(t) >= _EXACT_LIMIT) & (t != np.floor(t))))


def _floats(values: list) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return np.array(
            [v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in values], dtype=np.float64
        )


def _ints(values: list) -> np.ndarray:
    """int64 column; None, strings, non-finite and out-of-range values become -1 (absent)."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([int_or_absent(v) for v in values], dtype=np.int64)


def _to_ns(ts_us: np.ndarray) -> np.ndarray:
    """µs floats -> int64 ns without losing the integer part to float rounding."""
    whole = np.floor(ts_us)
    return whole.astype(np.int64) * 1000 + np.rint((ts_us - whole) * 1000.0).astype(np.int64)


def _link_warnings(path: str, early: int, linked: int, unusable: bool) -> list[str]:
    if not early:
        return []
    what = (
        f"{path}: {early} of {linked} device events start more than {CLOCK_NOISE_NS // 1000} µs before the launch "
        "their correlation id names, which no device can do"
    )
    if unusable:
        return [
            f"{what}: the trace's correlation ids are unusable (shifted, reused or merged from another trace?); every "
            "launch -> kernel link is broken and device events are placed in steps by time"
        ]
    return [f"{what}: those links are broken and the events placed in steps by time"]


def _start_ns(ts_us) -> int:
    """A dropped event's start in ns (before baseTimeNanoseconds), UNKNOWN_NS when unusable."""
    if isinstance(ts_us, (int, float)) and not isinstance(ts_us, bool) and abs(ts_us) < 9e15:
        return int(_to_ns(np.array([ts_us], np.float64))[0])
    return UNKNOWN_NS


def _intern(strings: dict[str, int], uniques) -> np.ndarray:
    return np.array([strings.setdefault(str(u), len(strings)) for u in uniques] or [0], dtype=np.int32)


def build_table(
    trace: Trace, path: str, rules: RuleSet, warnings: list[str], exact: tuple[list, list] | None = None
) -> tuple[EventTable, RankInfo]:
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
