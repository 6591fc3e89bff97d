"""Step windows as the analysis uses them (docs/analyze.md, "Steps and partial data").

Which host windows are the steps (``ProfilerStep#N``, or the instances of a user annotation with ``window``),
which events belong to each, how far each step's device work runs past its host window, and whether the trace
holds all of a step's work. The rules, in the order they apply:

- Two windows with the same step number: the longest is the step, the others are dropped (counted).
- A window inside another: the enclosing (outermost) window is the step and takes the nested one's events;
  a ProfilerStep that nests another is marked incomplete ("nests ..."); a ``window`` annotation nested in an
  instance of itself (a recursive call) is part of the enclosing instance, and the warnings count the merge. With
  ``instance`` K, the K-th instance of the annotation (all of them, nested ones too, in start order: HTA's
  ``instance_id``) is the only window, whether or not it lies inside another.
- Two windows that overlap without nesting: both are kept, the earlier one's host window ends where the later
  one starts (host events in the overlap belong to the later step, as the loader assigns them); both are
  marked incomplete ("overlaps ...").
- Host events belong to the window they start in; device events to the step of the launch that the
  correlation id names; device events without a launch record in the trace (launched before the profiler
  started) are placed by the window their start falls in and counted per step (``orphan_device_events``).
- A device event of a step that starts more than a second after the last step's host window is dropped
  (counted): a corrupt timestamp, not the step's work. So is a device event (or a gloo span) of step N that ends
  more than a second after step N+2 has both ended on the host and begun on the device (its host window's end, its
  first device event's start): by then the device has moved on two steps, whatever the host ran ahead by. Either marks the step
  incomplete, as does every event the loader dropped from it (``RankInfo.dropped``: placed by the step of its
  launch, else by the window its start falls in, else -- its time unreadable -- in every step).
- A step's device span runs from its window start to the end of its last device activity (at least its host
  window end). When the host runs ahead of a queued device (step N's device work begins only after step N-1's
  span ends), step N's span starts where step N-1's ends: until then the device was busy with step N-1, and
  counting that time twice made the steps of a device-bound run add up to more than the trace. Where the two
  steps' device work overlaps (a DDP all-reduce under the next step's kernels), the window start stands.
- Incomplete: the step lost events (above); its window is implausibly long (longer than twice the span of the
  trace's starts, or ending far past the trace's last host event: the loader's bounds); the step launched work
  and none of it is in the trace; the windows overlap or nest (above); or
  the trace is truncated and cannot be shown to hold the step whole: a truncated GPU trace never can (Kineto
  writes device activity in flush order, not time order), a CPU trace by the per-thread blocks Kineto writes
  (``_cpu_truncation``). A cut that took only the metadata trailer loses nothing.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import numpy as np

from ...loader.checks import PLAUSIBLE_MARGIN_NS
from ...model.dropped import UNKNOWN_NS, short_reasons
from ...model.events import ABSENT, DEVICE_KINDS, EventKind, EventTable
from ...model.traceset import RankInfo
from ..arrays import unique

LATE_NS = 1_000_000_000  # a device event this far past the last step is not the step's
_HOST_WINDOW_KINDS = (EventKind.ANNOTATION, EventKind.CPU_OP, EventKind.CPU_COMM_OP, EventKind.STEP, EventKind.OTHER)


@dataclass(frozen=True, slots=True)
class StepPlan:
    """The resolved step windows of one rank, and each event's step."""

    ids: np.ndarray  # step number per window, in time order
    start: np.ndarray  # host window start (ns)
    host_end: np.ndarray  # host window end (clipped at the next window's start where two overlap)
    end: np.ndarray  # device span end: max(host end, end of the step's last device activity)
    span_start: np.ndarray  # device span start: max(window start, previous span's end), at most ``end``
    step: np.ndarray  # each event's step, -1 outside every window
    keep: np.ndarray  # rows the analysis keeps (False: a device event dropped as far past the last step)
    reasons: tuple[str, ...]  # per window: "" when complete, else why the trace does not hold it whole
    orphans: np.ndarray  # per window: device events without a launch record placed in it
    warnings: tuple[str, ...] = ()
    dropped: np.ndarray | None = None  # per window: events lost from it (dropped by the loader or here); None: 0

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def complete(self) -> np.ndarray:
        return np.array([not r for r in self.reasons], dtype=bool)


@dataclass
class _Window:
    number: int
    start: int
    end: int
    label: str
    reasons: list[str]


def plan_steps(table: EventTable, info: RankInfo, window: str | None = None, instance: int | None = None) -> StepPlan:
    """Resolve ``table``'s step windows (``window``: an annotation name or glob instead of ProfilerStep; ``instance``:
    only that instance of it, nested ones counted)."""
    warnings: list[str] = []
    who = f"rank {info.rank}"
    windows, resolved = _candidates(table, window, who, warnings, instance)
    n = len(table)
    if not windows:
        if window is not None or n == 0:
            return _empty(n, warnings)
        lo, hi = int(table["ts_ns"].min()), int(table.end_ns.max())
        windows = [_Window(-1, lo, hi, "the whole trace", [])]
    starts = np.array([w.start for w in windows], np.int64)
    host_end = np.array([w.end for w in windows], np.int64)
    ids = np.array([w.number for w in windows], np.int64)
    ts = table["ts_ns"]
    device = (table["device"] >= 0) | table.mask_kind(EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)
    if window is None and not resolved:  # the loader's assignment stands (the same rules on clean windows)
        step = table["step"].astype(np.int64)
        orphan_rows = device & ~_launched(table, device)
    else:
        step = np.where(device, ABSENT, _by_window(ts, starts, host_end, ids))
        step, orphan_rows = _device_steps(table, step, device, starts, host_end, ids)
    orphan_rows &= table["device"] >= 0  # only real device events count as orphans
    keep = np.ones(n, dtype=bool)
    late = device & (step != ABSENT) & (ts > host_end.max() + LATE_NS)  # counted in a step, absurdly late
    late_steps = step[late]
    if late.any():
        keep &= ~late
        step = np.where(late, ABSENT, step)
        orphan_rows &= ~late
        warnings.append(
            f"{who}: dropped {int(late.sum())} device events that start more than 1 s after the last "
            "step (a corrupt timestamp or another run); the steps that launched them are marked incomplete"
        )
    lost = [dict[str, int]() for _ in windows]
    _count_rows(lost, late_steps, ids, "late")
    if len(ids) == 1 and ids[0] == -1:  # the whole trace is one window: every kept row is in it
        step = np.full(n, -1, np.int64)
    device_kind = _device_kind(table)
    pos, valid = _positions(step, ids, keep & device_kind)  # once for both per-window reductions
    overdue = _overdue(table, step, keep, host_end, _first_device_start(table, pos, valid, len(ids)), ids)
    if overdue.any():
        _count_rows(lost, step[overdue], ids, "overdue")
        keep &= ~overdue
        step = np.where(overdue, ABSENT, step)
        orphan_rows &= ~overdue
        warnings.append(
            f"{who}: dropped {int(overdue.sum())} device events (or communication spans) that end more than 1 s "
            "after the step two later ended on the host and began on the device: an implausible duration; their "
            "steps are marked incomplete"
        )
        pos, valid = _positions(step, ids, keep & device_kind)
    end = _span_end(table, pos, valid, host_end)
    span_start = span_starts(starts, end, _first_device_start(table, pos, valid, len(ids)))
    orphans = _count_by(step[orphan_rows & device_kind], ids)
    if orphans.sum():
        warnings.append(
            f"{who}: {int(orphans.sum())} device events have no launch record in the trace (launched "
            "before the profiler started, or a link the loader broke as impossible); placed by time window (HTA "
            "drops them), counted per step in orphan_device_events"
        )
    _completeness(table, info, windows, step, device & keep, end)
    _loader_drops(table, info, lost, step, starts, host_end, ids, who, warnings)
    _implausible_windows(table, windows)
    for w, counts in zip(windows, lost):
        if sum(counts.values()):
            total = sum(counts.values())
            w.reasons.insert(0, f"lost {total} event{'s' if total != 1 else ''} ({short_reasons(counts)})")
    return StepPlan(
        ids,
        starts,
        host_end,
        end,
        span_start,
        step.astype(np.int32),
        keep,
        tuple("; ".join(w.reasons) for w in windows),
        orphans,
        tuple(warnings),
        np.array([sum(c.values()) for c in lost], np.int64),
    )


def _empty(n: int, warnings: list[str]) -> StepPlan:
    z = np.zeros(0, np.int64)
    return StepPlan(z, z, z, z, z, np.full(n, ABSENT, np.int32), np.ones(n, bool), (), z, tuple(warnings))


def span_starts(starts: np.ndarray, ends: np.ndarray, first_device: np.ndarray) -> np.ndarray:
    """Each span's start: its window start; or, when the step's device work begins only after the previous span
    ends (a queued device: the host ran ahead), the previous span's end, since until then the device was busy
    with the previous step. Never past its own end. When the two steps' device work overlaps (a DDP all-reduce
    under the next step's kernels), the window start stands. ``starts`` are in time order."""
    out = starts.astype(np.int64).copy()
    if len(out) > 1:
        prev_end = np.maximum.accumulate(ends[:-1].astype(np.int64))
        queued = (first_device[1:] >= prev_end) & (first_device[1:] != np.iinfo(np.int64).max)  # no device work:
        # the window stands
        out[1:] = np.where(queued, np.minimum(np.maximum(out[1:], prev_end), ends[1:]), out[1:])
    return out


def _candidates(
    table: EventTable, window: str | None, who: str, warnings: list[str], instance: int | None = None
) -> tuple[list[_Window], bool]:
    """The host windows, resolved: duplicates dropped, nested ones merged into their enclosing window,
    overlapping ones clipped; each window with the reasons it is incomplete so far. The flag says whether
    any rule had to act (then the events' steps are assigned afresh)."""
    if window is None:
        rows = np.flatnonzero(table.mask_kind(EventKind.STEP))
        numbers = table["step"][rows].astype(np.int64)
        label = "ProfilerStep#{}"
    else:
        ids = [i for i, s in enumerate(table.strings) if s == window or fnmatch.fnmatchcase(s, window)]
        m = np.isin(table["name_id"], np.array(ids, np.int32)) & table.mask_kind(*_HOST_WINDOW_KINDS)
        rows = np.flatnonzero(m & (table["device"] < 0))
        rows = rows[np.lexsort((-table["dur_ns"][rows], table["ts_ns"][rows]))]
        numbers = np.arange(len(rows), dtype=np.int64)
        label = f"the {window!r} instance at {{}} ns"  # by start: instance numbers change once nested ones merge
        if instance is not None:  # one instance on its own, nested or not
            if not 0 <= instance < len(rows):
                return [], False
            i = rows[instance]
            return [
                _Window(instance, int(table["ts_ns"][i]), int(table.end_ns[i]), label.format(int(table["ts_ns"][i])), [])
            ], True
    if len(rows) == 0:
        return [], False
    starts, ends = table["ts_ns"][rows].astype(np.int64), table.end_ns[rows].astype(np.int64)
    before = len(numbers)
    numbers, starts, ends = _drop_duplicates(numbers, starts, ends, who, warnings)
    order = np.lexsort((-(ends - starts), starts))
    out: list[_Window] = []
    nested = overlapping = 0
    for i in order.tolist():
        w = _Window(
            int(numbers[i]),
            int(starts[i]),
            int(ends[i]),
            label.format(int(starts[i]) if window is not None else int(numbers[i])),
            [],
        )
        if out and w.start < out[-1].end:
            prev = out[-1]
            if w.end <= prev.end:  # an annotation nested in itself (a recursive forward) is part of its window
                nested += 1
                if window is None:
                    prev.reasons.append(f"nests {w.label} (the enclosing window is the step and takes its events)")
                continue
            overlapping += 1
            prev.reasons.append(f"overlaps {w.label} (host window clipped at its start)")
            w.reasons.append(f"overlaps {prev.label}")
            prev.end = w.start
        out.append(w)
    if window is not None:  # instances are numbered 0, 1, ... in time order once nested ones are merged
        for i, w in enumerate(out):
            w.number = i
    if nested and window is None:
        warnings.append(f"{who}: {nested} step windows nested in another; the enclosing window is the step (marked incomplete)")
    elif nested:
        warnings.append(
            f"{who}: {nested} instances of {window!r} lie inside another instance and are part of it; "
            "--instance K analyses the K-th instance (nested ones counted) on its own"
        )
    if overlapping:
        warnings.append(
            f"{who}: {overlapping} step windows overlap the previous one; the earlier window ends "
            "where the later starts (both marked incomplete)"
        )
    return out, bool(nested or overlapping or len(numbers) != before)


def _drop_duplicates(numbers, starts, ends, who: str, warnings: list[str]):
    """Windows with the same step number: keep the longest (the others are a few-µs marker on another thread)."""
    order = np.lexsort((-(ends - starts), numbers))
    first = np.ones(len(order), dtype=bool)
    first[1:] = numbers[order][1:] != numbers[order][:-1]
    dropped = int((~first).sum())
    if dropped:
        dup = sorted(set(numbers[order][~first].tolist()))
        warnings.append(
            f"{who}: {dropped} duplicate ProfilerStep windows (steps {_few(dup)}); the longest window of "
            "each number is the step, the others are ignored"
        )
    keep = order[first]
    return numbers[keep], starts[keep], ends[keep]


def _few(values: list[int]) -> str:
    return ", ".join(map(str, values[:8])) + (" ..." if len(values) > 8 else "")


def _by_window(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The window each time falls in (windows sorted and disjoint), -1 outside every window."""
    idx = np.searchsorted(starts, ts, side="right") - 1
    safe = np.clip(idx, 0, None)
    inside = (idx >= 0) & (ts < ends[safe])
    return np.where(inside, ids[safe], ABSENT)


def _launched(table: EventTable, device: np.ndarray) -> np.ndarray:
    """Rows whose correlation id names a launch (runtime call) in the trace."""
    corr = table["correlation"]
    rc = unique(corr[table.mask_kind(EventKind.RUNTIME) & (corr >= 0)])
    return device & np.isin(corr, rc) & (corr >= 0)


def _device_steps(table, step, device, starts, ends, ids):
    """Device events take the step of their launch (correlation id); those without a launch record in the
    trace are placed by time window. Returns (step, orphan rows)."""
    corr = table["correlation"]
    rt = np.flatnonzero(table.mask_kind(EventKind.RUNTIME) & (corr >= 0))
    rc = corr[rt]
    o = np.argsort(rc, kind="stable")
    rc, rsteps = rc[o], step[rt][o]
    dev = np.flatnonzero(device)
    hit = np.zeros(len(dev), dtype=bool)
    pos = np.zeros(len(dev), dtype=np.int64)
    if len(rc):
        pos = np.clip(np.searchsorted(rc, corr[dev]), 0, len(rc) - 1)
        hit = (rc[pos] == corr[dev]) & (corr[dev] >= 0)
    out = step.copy()
    out[dev[hit]] = rsteps[pos[hit]]
    orphan = np.zeros(len(step), dtype=bool)
    orphan[dev[~hit]] = True
    out[dev[~hit]] = _by_window(table["ts_ns"][dev[~hit]], starts, ends, ids)
    return out, orphan


def _count_rows(lost: list[dict[str, int]], steps: np.ndarray, ids: np.ndarray, reason: str) -> None:
    """Add each of ``steps`` (one per lost event; -1 for none) to the window of that number in ``lost``."""
    for i, c in enumerate(_count_by(steps, ids).tolist()):
        if c:
            lost[i][reason] = lost[i].get(reason, 0) + c


def _overdue(table: EventTable, step, keep, host_end, first_device, ids) -> np.ndarray:
    """Device events and communication spans of step N that end more than 1 s after step N+2 has ended on the host
    and begun on the device (its host window's end, its first device event's start; the later of the two)."""
    if len(ids) < 3:
        return np.zeros(len(step), dtype=bool)
    later = np.maximum(host_end[2:], np.where(first_device[2:] == np.iinfo(np.int64).max, host_end[2:], first_device[2:]))
    bound = np.full(len(ids), np.iinfo(np.int64).max, np.int64)
    bound[:-2] = later + LATE_NS
    rows = keep & table.mask_kind(*DEVICE_KINDS) & (step != ABSENT)
    pos, valid = _positions(step, ids, rows)
    return valid & (table.end_ns > bound[pos])


def _loader_drops(table, info: RankInfo, lost, step, starts, host_end, ids, who: str, warnings: list[str]) -> None:
    """Count the events the loader dropped into the windows they were lost from: the step of their launch (the
    correlation id), else the window their start falls in; those whose time is unreadable, in every window."""
    d = info.dropped
    if not d or not len(ids):
        return
    ts = np.array(d.ts_ns, np.int64)
    corr = np.array(d.correlation, np.int64)
    reasons = np.array(d.reason, dtype=object)
    rt = np.flatnonzero(table.mask_kind(EventKind.RUNTIME) & (table["correlation"] >= 0))
    rc = table["correlation"][rt]
    order = np.argsort(rc, kind="stable")
    rc, rsteps = rc[order], step[rt][order]
    where = np.full(len(ts), ABSENT, np.int64)
    known = ts != UNKNOWN_NS
    where[known] = _by_window(ts[known], starts, host_end, ids)
    if len(rc) and len(corr):
        at = np.clip(np.searchsorted(rc, corr), 0, len(rc) - 1)
        linked = (corr >= 0) & (rc[at] == corr)
        where[linked] = rsteps[at[linked]]
    anywhere = {r: n for r, n in d.unplaced().items()}
    for r in sorted(set(d.reason)):
        _count_rows(lost, where[(reasons == r) & (known | (corr >= 0))], ids, r)
        stray = int(np.count_nonzero((reasons == r) & ~known & (corr >= 0) & (where == ABSENT)))
        if stray:  # a correlation that names no launch and no readable time: any step may have lost it
            anywhere[r] = anywhere.get(r, 0) + stray
    if anywhere:
        for counts in lost:
            for r, n in anywhere.items():
                counts[r] = counts.get(r, 0) + n
        warnings.append(
            f"{who}: {sum(anywhere.values())} dropped events have no readable time; any step may have lost them, so "
            "every step is marked incomplete (--allow-partial gates them anyway)"
        )


def _implausible_windows(table: EventTable, windows: list[_Window]) -> None:
    """A step window the loader's bounds would refuse (``loader.checks.implausible_times``; kept there so that the
    step is marked, not lost): longer than max(2 S, S + 1 s), S the span of the trace's starts, or ending more than
    max(1 s, S) past the last other host event."""
    if len(table) < 2:
        return
    ts = table["ts_ns"]
    span = int(ts.max()) - int(ts.min())
    other_host = (table["device"] < 0) & ~table.mask_kind(EventKind.STEP)
    last = int(table.end_ns[other_host].max()) if other_host.any() else None
    for w in windows:
        long = w.end - w.start > max(2 * span, span + PLAUSIBLE_MARGIN_NS)
        if long or (last is not None and w.end > last + max(PLAUSIBLE_MARGIN_NS, span)):
            w.reasons.append(
                f"its window is implausibly long ({(w.end - w.start) / 1e6:.6g} ms, while the trace's events start "
                f"within {span / 1e6:.6g} ms): a corrupt duration"
            )


def _device_kind(table: EventTable) -> np.ndarray:
    return table.mask_kind(*DEVICE_KINDS)


def _count_by(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    pos = {int(s): i for i, s in enumerate(ids.tolist())}
    out = np.zeros(len(ids), np.int64)
    for v, c in zip(*np.unique(values, return_counts=True)):
        if int(v) in pos:
            out[pos[int(v)]] = int(c)
    return out


def _span_end(table: EventTable, pos: np.ndarray, valid: np.ndarray, host_end: np.ndarray) -> np.ndarray:
    """Per window: the end of its last device activity (the ``valid`` rows, in window ``pos``), at least its host
    end."""
    end = host_end.copy()
    np.maximum.at(end, pos[valid], table.end_ns[valid])
    return end


def _first_device_start(table: EventTable, pos: np.ndarray, valid: np.ndarray, windows: int) -> np.ndarray:
    """Per window: the start of its first device activity (int64 max when it has none)."""
    first = np.full(windows, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, pos[valid], table["ts_ns"][valid].astype(np.int64))
    return first


def _positions(step: np.ndarray, ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's window index, and whether it is one of ``rows`` and its ``step`` names one of ``ids``. Step
    numbers are small integers: a lookup table over their range (no binary search, no clip of every row)."""
    n = len(step)
    if len(ids) == 0:
        return np.zeros(n, np.int64), np.zeros(n, bool)
    lo, hi = min(int(ids.min()), int(step.min())), max(int(ids.max()), int(step.max()))
    ascending = bool(np.all(np.diff(ids) > 0))
    if ascending and hi - lo <= 4 * len(ids) + 4096:
        lut = np.full(hi - lo + 1, -1, np.int64)
        lut[ids - lo] = np.arange(len(ids))
        pos = lut[step - lo]
    elif ascending:
        pos = np.minimum(np.searchsorted(ids, step), len(ids) - 1)
        pos = np.where(ids[pos] == step, pos, -1)
    else:  # ids not sorted (cannot happen for ProfilerStep in time order, but be safe)
        where = {int(s): i for i, s in enumerate(ids.tolist())}
        pos = np.array([where.get(int(s), -1) for s in step.tolist()], np.int64)
    valid = (pos >= 0) & rows
    return np.where(valid, pos, 0), valid


def _completeness(table, info: RankInfo, windows: list[_Window], step, device, end) -> None:
    """Add the missing-device-work and truncation reasons to ``windows``."""
    ids = np.array([w.number for w in windows], np.int64)
    dev_steps = set(unique(step[device & _device_kind(table)]).tolist())
    has_device = bool((device & _device_kind(table)).any())
    launches = dict(zip(*np.unique(step[_launch_calls(table)], return_counts=True)))
    for i, w in enumerate(windows):
        n = int(launches.get(int(ids[i]), 0))
        if has_device and n and int(ids[i]) not in dev_steps:
            w.reasons.append(f"its {n} launches have no device activity in the trace")
    if not info.truncated or info.activities_whole:  # the cut took only the metadata written after everything
        return
    if has_device or lost_every_device_event(info) or info.last_complete_ns < 0:
        why = (
            "the trace is truncated and its ns timestamps could only be read rounded (the exact pass needs the whole file)"
            if info.last_complete_ns < 0
            else "the truncated GPU trace lost every device event"
            if not has_device
            else "the trace is truncated and Kineto writes device activity in flush order, not time order: any "
            "step may have lost device events past the cut"
        )
        for w in windows:
            w.reasons.append(why)
        return
    _cpu_truncation(table, info, windows, ids, step, end)


def _cpu_truncation(table, info: RankInfo, windows: list[_Window], ids, step, end) -> None:
    """A truncated CPU trace: Kineto writes each host thread's events as one time-ordered block, so the thread
    the cut falls in lost its events after the cut (the last event kept, ``last_complete_ns``) and the threads
    written after it lost everything; a gloo worker lost that way shows as collective calls without spans."""
    calls, spans = _calls_and_spans(table, step)
    drift = any(spans.get(s, 0) < c for s, c in calls.items())
    unchecked = bool(spans) and not calls
    for i, w in enumerate(windows):
        s = int(ids[i])
        if end[i] >= info.last_complete_ns:
            w.reasons.append("the trace was cut (truncated file) before the step's work ends")
        if unchecked:
            w.reasons.append(
                "the trace is truncated and has no collective calls to check its communication spans "
                "against (a worker thread's spans may be lost whole)"
            )
        elif spans.get(s, 0) != calls.get(s, spans.get(s, 0)):
            w.reasons.append(f"{calls[s]} collective calls but {spans.get(s, 0)} communication spans (lost at the truncation)")
        elif drift and s in calls:
            w.reasons.append(
                "communication spans were lost at the truncation: gloo spans take their call's step "
                "in issue order, so no step's links can be trusted"
            )


def lost_every_device_event(info: RankInfo) -> bool:
    """A truncated trace that says it came from a GPU (device properties, or an NCCL-family backend) but kept no
    device event: the cut took them all (Kineto writes device activity after the host events)."""
    gpu = bool(info.device_properties) or any(b in info.backend.lower() for b in ("nccl", "rccl", "hccl", "xccl"))
    return info.truncated and info.device_type == "cpu" and gpu


_LAUNCH_WORDS = ("launch", "memcpy", "memset")  # cudaLaunchKernel, hipExtModuleLaunchKernel, cudaGraphLaunch, ...


def _launch_calls(table: EventTable) -> np.ndarray:
    """Runtime calls that put work on the device (not cudaStreamSynchronize, cudaGetDevice, ...)."""
    rt = table.mask_kind(EventKind.RUNTIME) & (table["correlation"] >= 0)
    ids = unique(table["name_id"][rt])
    hits = [i for i in ids.tolist() if i >= 0 and any(w in table.strings[i].lower() for w in _LAUNCH_WORDS)]
    return rt & np.isin(table["name_id"], np.array(hits, np.int32))


_CALL_FAMILIES = ("c10d::", "tracekit:comm", "record_param_comms")


def _calls_and_spans(table: EventTable, step: np.ndarray) -> tuple[dict, dict]:
    """Per step: the collective calls issued on the host (the largest count of one family: c10d ops,
    tracekit's annotations, record_param_comms) and the communication spans (gloo worker threads). A truncated
    CPU trace that lost a worker thread's events has fewer spans than calls. Kineto writes each thread's
    events as one block, so a thread written after the cut is lost whole."""
    comm = table.mask_kind(EventKind.COMM)
    workers = unique(table["stream"][comm])
    calls_m = table.mask_kind(EventKind.CPU_COMM_OP) & ~np.isin(table["stream"], workers)
    names = table.strings
    rows = np.flatnonzero(calls_m)
    fam = np.array(
        [
            next((i for i, f in enumerate(_CALL_FAMILIES) if names[n].startswith(f)), -1) if n >= 0 else -1
            for n in table["name_id"][rows].tolist()
        ],
        dtype=np.int64,
    )
    calls: dict = {}
    for f in range(len(_CALL_FAMILIES)):
        for st, c in zip(*np.unique(step[rows[fam == f]], return_counts=True)):
            calls[int(st)] = max(calls.get(int(st), 0), int(c))
    spans = {int(st): int(c) for st, c in zip(*np.unique(step[comm], return_counts=True))}
    return calls, spans
