"""Hidden and exposed communication per rank, step, stream and collective instance (DESIGN.md definitions).

K = union of compute (device KERNELs; on CPU-only runs, each thread's CPU_OPs minus the time that thread is
blocked in a wait or a collective call), C = union of
COMM. A step's figures use the events the step launched (the loader's ``step`` column) and hold its
communication against *all* compute: hidden_N = |C_N ∩ K|. Wall and idle are the step window's own time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model.events import EventKind, EventTable
from ...model.traceset import RankInfo
from .. import intervals as iv
from .instances import Instances, instances_from_table
from .steps import StepPlan, lost_every_device_event, plan_steps


@dataclass(frozen=True, slots=True)
class StepOverlap:
    step: int | None  # None for a rank's totals
    wall_ns: int  # the step's time: its device span (window start, or the previous span's end when later -> end
    # of its last device activity)
    compute_ns: int
    comm_ns: int
    hidden_comm_ns: int
    exposed_comm_ns: int
    idle_ns: int
    memcpy_ns: int
    memset_ns: int
    multi_stream_comm_ns: int
    host_wall_ns: int = 0  # the host window (ProfilerStep or --window annotation)
    orphan_device_events: int = 0  # device events without a launch record placed in the step by time
    dropped_events: int = 0  # events lost from the step: dropped by the loader or as implausible (steps.py)
    complete: bool = True
    partial_reason: str = ""
    steps_left_out: int = 0  # totals only: incomplete steps not summed

    @property
    def overlap_ratio(self) -> float:
        return self.hidden_comm_ns / self.comm_ns if self.comm_ns else 0.0

    def to_dict(self) -> dict:
        d: dict = {} if self.step is None else {"step": self.step}
        for key in ("wall", "compute", "comm", "hidden_comm", "exposed_comm"):
            d[f"{key}_us"] = getattr(self, f"{key}_ns") / 1e3
        d["overlap_ratio"] = self.overlap_ratio
        for key in ("idle", "memcpy", "memset", "multi_stream_comm", "host_wall"):
            d[f"{key}_us"] = getattr(self, f"{key}_ns") / 1e3
        d["orphan_device_events"] = self.orphan_device_events
        d["dropped_events"] = self.dropped_events
        if self.step is None:
            d["steps_left_out"] = self.steps_left_out
        else:
            d["complete"] = self.complete
            if not self.complete:
                d["partial_reason"] = self.partial_reason
        return d

    @staticmethod
    def total(steps: tuple[StepOverlap, ...]) -> StepOverlap:
        """Sums over the complete steps; the incomplete ones are counted in ``steps_left_out``."""
        whole = [s for s in steps if s.complete]
        sums = {f: sum(getattr(s, f) for s in whole) for f in _ADDITIVE}
        return StepOverlap(None, steps_left_out=len(steps) - len(whole), **sums)


_ADDITIVE = (
    "wall_ns",
    "compute_ns",
    "comm_ns",
    "hidden_comm_ns",
    "exposed_comm_ns",
    "idle_ns",
    "memcpy_ns",
    "memset_ns",
    "multi_stream_comm_ns",
    "host_wall_ns",
    "orphan_device_events",
    "dropped_events",
)


@dataclass(frozen=True, slots=True)
class StreamOverlap:
    stream: int
    comm_ns: int
    hidden_comm_ns: int
    exposed_comm_ns: int

    def to_dict(self) -> dict:
        return {
            "stream": self.stream,
            "comm_us": self.comm_ns / 1e3,
            "hidden_comm_us": self.hidden_comm_ns / 1e3,
            "exposed_comm_us": self.exposed_comm_ns / 1e3,
        }


@dataclass(frozen=True, slots=True)
class RankOverlap:
    rank: int
    device_type: str
    steps: tuple[StepOverlap, ...]
    totals: StepOverlap
    streams: tuple[StreamOverlap, ...]
    instances: Instances
    warnings: tuple[str, ...] = ()
    plan: StepPlan | None = field(default=None, repr=False, compare=False)  # the resolved step windows

    @property
    def complete_steps(self) -> tuple[StepOverlap, ...]:
        return tuple(s for s in self.steps if s.complete)

    def __repr__(self) -> str:  # one line: the tables stay in to_dict() and the frames
        t = self.totals
        return (
            f"RankOverlap(rank {self.rank}, {len(self.complete_steps)}/{len(self.steps)} complete steps, wall "
            f"{t.wall_ns / 1e6:.3f} ms, comm {t.comm_ns / 1e6:.3f} ms, exposed {t.exposed_comm_ns / 1e6:.3f} ms, "
            f"{len(self.instances):,} collectives)"
        )

    def ratio_over(self, steps) -> float:
        """The overlap ratio over a subset of steps (e.g. all but the last, as HTA analyses)."""
        chosen = [s for s in self.steps if s.step in set(steps)]
        comm = sum(s.comm_ns for s in chosen)
        return sum(s.hidden_comm_ns for s in chosen) / comm if comm else 0.0

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "steps": [s.to_dict() for s in self.steps],
            "totals": self.totals.to_dict(),
            "streams": [s.to_dict() for s in self.streams],
        }


def compute_mask(table: EventTable, device_type: str) -> np.ndarray:
    return table.mask_kind(EventKind.CPU_OP if device_type == "cpu" else EventKind.KERNEL)


def compute_union(table: EventTable, device_type: str) -> iv.Intervals:
    """K: device kernels; on CPU-only runs each host thread's operators minus the time that thread is blocked
    in communication -- a ``Work.wait`` (SYNC) or a collective call (CPU_COMM_OP: a synchronous c10d op, a
    tracekit issue annotation). Per thread, because an enclosing op (an autograd Function around a collective)
    is not compute while its thread waits, but another thread's op running meanwhile is."""
    m = compute_mask(table, device_type)
    if device_type != "cpu":
        rows = np.flatnonzero(m)
        return iv.union(table["ts_ns"][rows], table.end_ns[rows])
    blocked = table.mask_kind(EventKind.SYNC, EventKind.CPU_COMM_OP) & (table["device"] < 0)
    stream = table["stream"]
    parts = []
    for thread in np.unique(stream[m]):
        ops, blk = m & (stream == thread), blocked & (stream == thread)
        k = iv.union(table["ts_ns"][ops], table.end_ns[ops])
        parts.append(iv.subtract(k, iv.union(table["ts_ns"][blk], table.end_ns[blk])) if blk.any() else k)
    return iv.merge(*parts) if parts else iv.empty()


def _kind_union(table: EventTable, *kinds: EventKind) -> iv.Intervals:
    rows = np.flatnonzero(table.mask_kind(*kinds))
    return iv.union(table["ts_ns"][rows], table.end_ns[rows])


def _per_step(table, mask, step, ids, minus: iv.Intervals | None = None, against: iv.Intervals | None = None):
    """Per step: |union of the step's events| (minus ``minus``) and, if given, its overlap with ``against``."""
    rows = np.flatnonzero(mask)
    g, s, e = iv.union_by_group(step[rows], table["ts_ns"][rows], table.end_ns[rows])
    lengths = e - s
    if minus is not None:
        lengths = lengths - iv.overlap_each(minus, s, e)
    total = iv.sum_by_key(g, lengths, ids)
    if against is None:
        return total, None
    return total, iv.sum_by_key(g, iv.overlap_each(against, s, e), ids)


def _multi_stream(table, comm, step, ids) -> np.ndarray:
    """Per step: time during which communication of that step runs on two or more streams at once."""
    if not comm.any():
        return np.zeros(len(ids), np.int64)
    st = table["stream"][comm]
    _, sidx = np.unique(st, return_inverse=True)
    nstreams = int(sidx.max()) + 1
    sstep = step[comm]
    _, pidx = np.unique(sstep, return_inverse=True)
    key = pidx.astype(np.int64) * nstreams + sidx
    g, s, e = iv.union_by_group(key, table["ts_ns"][comm], table.end_ns[comm])  # each stream's union
    step_of_piece = np.unique(sstep)[g // nstreams]
    g2, s2, e2 = iv.at_least_by_group(step_of_piece, s, e, 2)
    return iv.sum_by_key(g2, e2 - s2, ids)


def rank_overlap(table: EventTable, info: RankInfo, plan: StepPlan | None = None) -> RankOverlap:
    """Per-step and per-stream overlap of one rank. ``table`` is the analysis' table (``plan.step`` as its
    step column, the rows ``plan.keep`` only): see ``restep``."""
    if plan is None:
        plan = plan_steps(table, info)
        table = restep(table, plan)
    dev = info.device_type
    if lost_every_device_event(info):
        dev = "cuda"  # a GPU trace whose device events were all lost at the cut is not a CPU-only run
    ids, ws, we = plan.ids, plan.span_start, plan.end
    step = table["step"].astype(np.int64)
    in_steps = np.isin(step, ids) if len(ids) else np.zeros(len(table), bool)
    comm = table.mask_kind(EventKind.COMM) & in_steps
    k = compute_union(table, dev)
    comm_ns, hidden_ns = _per_step(table, comm, step, ids, against=k)
    _, compute_ns = _per_step(table, compute_mask(table, dev) & in_steps, step, ids, against=k)  # |K_N|
    memcpy_ns, _ = _per_step(table, table.mask_kind(EventKind.MEMCPY) & in_steps, step, ids)
    memset_ns, _ = _per_step(table, table.mask_kind(EventKind.MEMSET) & in_steps, step, ids)
    busy = iv.merge(k, _kind_union(table, EventKind.COMM, EventKind.MEMCPY, EventKind.MEMSET))
    wall = we - ws
    idle = wall - iv.length_in_windows(busy, ws, we) if len(ids) else wall
    multi = _multi_stream(table, comm, step, ids)
    host_wall = plan.host_end - plan.start
    steps = tuple(
        StepOverlap(
            int(ids[i]),
            int(wall[i]),
            int(compute_ns[i]),
            int(comm_ns[i]),
            int(hidden_ns[i]),
            int(comm_ns[i] - hidden_ns[i]),
            int(idle[i]),
            int(memcpy_ns[i]),
            int(memset_ns[i]),
            int(multi[i]),
            int(host_wall[i]),
            int(plan.orphans[i]),
            0 if plan.dropped is None else int(plan.dropped[i]),
            not plan.reasons[i],
            plan.reasons[i],
        )
        for i in range(len(ids))
    )
    all_comm = table.mask_kind(EventKind.COMM)
    warnings = list(plan.warnings)
    outside = int((all_comm & ~in_steps).sum())
    if outside:
        warnings.append(
            f"rank {info.rank}: {outside} communication events outside every ProfilerStep are left out of the per-step figures"
        )
    left_out = [s for s in steps if not s.complete]
    if left_out:
        warnings.append(
            f"rank {info.rank}: {len(left_out)} of {len(steps)} steps are incomplete and left out of "
            f"the totals ({_step_reasons(left_out)})"
        )
    return RankOverlap(
        info.rank,
        dev,
        steps,
        StepOverlap.total(steps),
        _streams(table, comm, k),
        instances_from_table(table, info.rank, k, info),
        tuple(warnings),
        plan,
    )


def restep(table: EventTable, plan: StepPlan) -> EventTable:
    """The table the analysis sees: the plan's step column, without the rows it drops."""
    out = table.with_columns(step=plan.step)
    return out if plan.keep.all() else out.select(plan.keep)


def _step_reasons(steps) -> str:
    shown = [f"step {s.step}: {s.partial_reason}" for s in steps[:3]]
    return "; ".join(shown) + (f"; ... {len(steps) - 3} more" if len(steps) > 3 else "")


def _streams(table, comm, k) -> tuple[StreamOverlap, ...]:
    g, s, e = iv.union_by_group(table["stream"][comm], table["ts_ns"][comm], table.end_ns[comm])
    streams = np.unique(g)
    total = iv.sum_by_key(g, e - s, streams)
    hidden = iv.sum_by_key(g, iv.overlap_each(k, s, e), streams)
    return tuple(StreamOverlap(int(st), int(t), int(h), int(t - h)) for st, t, h in zip(streams, total, hidden))
