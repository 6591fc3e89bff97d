"""What the single-rank breakdowns share: the step windows, the device activities a step range launched, and
each activity's launch (the runtime call with the same correlation id).

Windows and step membership are overlap.py's own (the step plan of analyzers/comm/steps.py: resolved ProfilerStep#N
windows or ``window`` annotations measured over their device spans; device work belongs to the step whose host
call launched it; a trace without steps is one window, step -1), so the idle time here is the idle time of the
overlap totals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...model.events import EventKind, EventTable
from ...model.traceset import RankInfo

if TYPE_CHECKING:
    from ..comm.steps import StepPlan

ACTIVITY_KINDS = (EventKind.KERNEL, EventKind.COMM, EventKind.MEMCPY, EventKind.MEMSET, EventKind.SYNC)
BUSY_KINDS = (EventKind.KERNEL, EventKind.COMM, EventKind.MEMCPY, EventKind.MEMSET)  # overlap.py's busy time


@dataclass(frozen=True, slots=True)
class Scope:
    """One rank's step range: its windows and the rows of the device activities those steps launched."""

    table: EventTable
    step_ids: np.ndarray  # int64, in window order
    win_start: np.ndarray
    win_end: np.ndarray
    rows: np.ndarray  # row indices of the selected device activities (ACTIVITY_KINDS), sorted by start
    has_steps: bool


def step_windows(table: EventTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step ids, window starts, window ends) in time order; one window over the whole trace without steps."""
    m = table.mask_kind(EventKind.STEP)
    if m.any():
        ids, ws, we = table["step"][m].astype(np.int64), table["ts_ns"][m], table.end_ns[m]
        _, first = np.unique(ids, return_index=True)  # a step seen twice (two threads): the first, as overlap.py
        order = first[np.argsort(ws[first], kind="stable")]
        return ids[order], ws[order], we[order]
    if len(table) == 0:
        return np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
    return np.array([-1]), np.array([int(table["ts_ns"].min())]), np.array([int(table.end_ns.max())])


def scope(
    table: EventTable,
    steps: tuple[int, ...] | None = None,
    info: RankInfo | None = None,
    window: str | None = None,
    plan: StepPlan | None = None,
) -> Scope:
    """The windows of ``steps`` (all when None) and the device activities launched in them. With ``info``, the
    windows are the analysis' step plan (device spans, nesting and duplicate rules, ``window`` annotations).
    ``plan``: the plan ``table`` was already re-stepped with (``analyze()`` passes the comm analyzer's own, so
    the steps are not planned twice); the table is then the analysis' table as it is."""
    if plan is None and info is not None:
        from ..comm.overlap import restep
        from ..comm.steps import plan_steps

        plan = plan_steps(table, info, window)
        table = restep(table, plan) if len(plan) else table
    if plan is not None and len(plan):
        ids, ws, we = plan.ids.astype(np.int64), plan.span_start, plan.end
        has_steps = not (len(ids) == 1 and ids[0] == -1)
        return _scoped(table, steps, ids, ws, we, has_steps)
    ids, ws, we = step_windows(table)
    has_steps = bool(table.mask_kind(EventKind.STEP).any())
    return _scoped(table, steps, ids, ws, we, has_steps)


def _scoped(
    table: EventTable, steps: tuple[int, ...] | None, ids: np.ndarray, ws: np.ndarray, we: np.ndarray, has_steps: bool
) -> Scope:
    if steps is not None and has_steps:
        keep = np.isin(ids, np.asarray(steps, dtype=np.int64))
        ids, ws, we = ids[keep], ws[keep], we[keep]
    act = table.mask_kind(*ACTIVITY_KINDS)
    if has_steps:
        act &= np.isin(table["step"].astype(np.int64), ids)
    rows = np.flatnonzero(act)
    rows = rows[np.argsort(table["ts_ns"][rows], kind="stable")]
    return Scope(table, ids, ws, we, rows, has_steps)


def launch_rows(table: EventTable, rows: np.ndarray) -> np.ndarray:
    """For each device activity row, the row of the runtime call with its correlation id (-1 if none; the
    first such call when a trace repeats an id)."""
    rt = np.flatnonzero(table.mask_kind(EventKind.RUNTIME) & (table["correlation"] >= 0))
    out = np.full(len(rows), -1, np.int64)
    if len(rt) == 0 or len(rows) == 0:
        return out
    corr = table["correlation"]
    rc = corr[rt]
    order = np.argsort(rc, kind="stable")
    rc, rt = rc[order], rt[order]
    want = corr[rows]
    pos = np.clip(np.searchsorted(rc, want), 0, len(rc) - 1)
    hit = (rc[pos] == want) & (want >= 0)
    out[hit] = rt[pos[hit]]
    return out


def percentile(values: np.ndarray, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN for no values."""
    return float(np.percentile(values, q)) if len(values) else float("nan")
