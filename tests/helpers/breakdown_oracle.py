"""An independent reading of the single-rank breakdowns, straight from a trace's raw JSON: it imports nothing from
tracekit (no loader, no analyzer), so a bug there cannot hide here. Times in integer ns from the JSON's own
decimal text; device activities by category; communication by its own statement of the rules (collective
metadata, an ``nccl`` kernel name, or a launch from inside a collective host op); kernel classes from the
hand-labelled conformance table (tests/data/kernel_names/kernel_classes.tsv); percentiles, unions, the busy
partition, the stream queue and the queue depth each by plain Python. Slow on purpose: clarity over speed.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "data" / "kernel_names" / "kernel_classes.tsv"
DEVICE_CATS = {"kernel": "kernel", "Kernel": "kernel", "cuda_profiler_range": "kernel", "mtia_ccp_events": "kernel",
               "gpu_memcpy": "memcpy", "Memcpy": "memcpy", "gpu_memset": "memset", "Memset": "memset",
               "cuda_sync": "sync"}  # fmt: skip
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime", "xpu_runtime", "xpu_driver"}
HOST_CATS = {"cpu_op", "user_annotation", "Operator"}
STEP = re.compile(r"^ProfilerStep#(\d+)$")
COLLECTIVE_OP = re.compile(r"^(c10d::|record_param_comms$|nccl:|c10d_functional::|_c10d_functional::)")


def _ns(v) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    d = (v if isinstance(v, Decimal) else Decimal(v)) * 1000
    return int(d.to_integral_value()) if d.is_finite() else None


@dataclass
class Act:
    """One device activity: its kind ("kernel", "comm", "memcpy", "memset", "sync"), times, stream, launch."""

    name: str
    kind: str
    start: int
    dur: int
    stream: tuple
    corr: int | None
    launch: tuple[int, int] | None = None  # (start, dur) of its runtime call
    launch_tid: object = None
    step: int | None = None

    @property
    def end(self) -> int:
        return self.start + self.dur


@dataclass
class Trace:
    acts: list[Act]
    steps: list[tuple[int, int, int]]  # (number, start, end) in time order
    hosts: list[tuple[object, int, int, str]] = field(default_factory=list)  # host ops: (tid, start, end, name)


def read(path: str) -> Trace:
    raw = gzip.decompress(Path(path).read_bytes()) if str(path).endswith(".gz") else Path(path).read_bytes()
    doc = json.loads(raw, parse_float=Decimal)  # the text's own digits: float µs lose ns at epoch times
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    acts, runtime, hosts, steps = [], {}, [], []
    device_side = {a.stream[0] for a in _device_side_runtime(events)}
    for e in events:
        if e.get("ph") != "X" or not isinstance(e.get("name"), str):
            continue
        ts, dur, cat, name, args = _ns(e.get("ts")), _ns(e.get("dur")), e.get("cat"), e["name"], e.get("args") or {}
        if ts is None or dur is None or dur < 0:
            continue
        if cat in DEVICE_CATS:
            kind = DEVICE_CATS[cat]
            if cat == "mtia_ccp_events":
                kind = "memcpy" if name.startswith("dma") else "sync" if re.match(r"^event_(record|wait)", name) else kind
            if kind == "kernel" and ("Collective name" in args or name.startswith("nccl")):
                kind = "comm"
            corr = args.get("correlation")
            acts.append(Act(name, kind, ts, dur, (e.get("pid"), e.get("tid")), corr if isinstance(corr, int) else None))
        elif cat in RUNTIME_CATS and isinstance(args.get("correlation"), int) and e.get("pid") not in device_side:
            runtime.setdefault(args["correlation"], (ts, dur, e.get("tid")))
        elif cat in HOST_CATS:
            hosts.append((e.get("tid"), ts, ts + dur, name))
            m = STEP.match(name)
            if m:
                steps.append((int(m.group(1)), ts, ts + dur))
    acts += _device_side_runtime(events)
    for a in acts:
        if a.corr is not None and a.corr in runtime:
            start, dur, tid = runtime[a.corr]
            a.launch, a.launch_tid = (start, dur), tid
    t = Trace(acts, sorted(set(steps), key=lambda s: s[1]), hosts)
    _launch_context(t)
    _assign_steps(t)
    return t


def _device_side_runtime(events: list) -> list[Act]:
    """A runtime-category event on a pid that holds device events and no host operator is the device's own
    record (MTIA's device-side ``synchronize``): a device sync, not a launch."""
    dev_pids = {e.get("pid") for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS}
    host_pids = {e.get("pid") for e in events if e.get("ph") == "X" and e.get("cat") in HOST_CATS}
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and e.get("pid") in dev_pids - host_pids:
            ts, dur = _ns(e.get("ts")), _ns(e.get("dur"))
            if ts is not None and dur is not None and dur >= 0:
                corr = (e.get("args") or {}).get("correlation")
                out.append(Act(e["name"], "sync", ts, dur, (e.get("pid"), e.get("tid")), corr if isinstance(corr, int) else None))
    return out


def _launch_context(t: Trace) -> None:
    """A kernel or copy launched from directly inside a collective host op (the innermost host op enclosing the
    launch call is the collective op) is communication."""
    by_tid: dict = {}
    for h in t.hosts:
        by_tid.setdefault(h[0], []).append(h)
    for a in t.acts:
        if a.kind not in ("kernel", "memcpy") or a.launch is None:
            continue
        at = a.launch[0]
        around = [h for h in by_tid.get(a.launch_tid, []) if h[1] <= at <= h[2] and not STEP.match(h[3])]
        if around:
            inner = max(around, key=lambda h: (h[1], -h[2]))
            if COLLECTIVE_OP.match(inner[3]) and "wait" not in inner[3]:
                a.kind = "comm"


def _assign_steps(t: Trace) -> None:
    """An activity belongs to the step whose window holds its launch call; without one, the window holding it."""
    for a in t.acts:
        at = a.launch[0] if a.launch is not None else a.start
        a.step = next((n for n, s, e in t.steps if s <= at < e), None)


def scope(t: Trace) -> list[Act]:
    """The activities of the steps (every activity when the trace has no steps)."""
    return [a for a in t.acts if a.step is not None] if t.steps else list(t.acts)


def percentile(values: list, q: float) -> float | None:
    """Linear interpolation between closest ranks."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def union(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total


BUSY = {"kernel": 1, "comm": 2, "memcpy": 4, "memset": 4}
PARTS = {1: "compute", 2: "communication", 4: "memory", 3: "compute_overlapping_communication",
         5: "compute_overlapping_memory", 6: "communication_overlapping_memory",
         7: "compute_overlapping_communication_overlapping_memory"}  # fmt: skip


def busy_parts(acts: list[Act]) -> dict[str, int]:
    """Each ns of busy time in exactly one part, by the set of categories covering it (a sweep over the ends)."""
    edges = sorted(
        (p, sign, BUSY[a.kind]) for a in acts if a.kind in BUSY and a.dur > 0 for p, sign in ((a.start, 1), (a.end, -1))
    )
    parts = dict.fromkeys(PARTS.values(), 0)
    live = {1: 0, 2: 0, 4: 0}
    prev = None
    for p, sign, bit in edges:
        mask = sum(b for b, n in live.items() if n > 0)
        if prev is not None and mask and p > prev:
            parts[PARTS[mask]] += p - prev
        live[bit] += sign
        prev = p
    return parts


def kernel_rows(acts: list[Act]) -> dict[str, dict]:
    """Per name: count, total, max, p50, p95 (ns) of the activities."""
    by: dict[str, list[int]] = {}
    for a in acts:
        by.setdefault(a.name, []).append(a.dur)
    return {
        n: {"count": len(d), "total": sum(d), "max": max(d), "p50": percentile(d, 50), "p95": percentile(d, 95)}
        for n, d in by.items()
    }


def hand_labels() -> dict[str, str]:
    out = {}
    for line in TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            label, _, name = line.split("\t")
            out[name] = label
    return out


def class_totals(acts: list[Act]) -> dict[str, int]:
    """Total ns per class, classes of the names the conformance table labels (memcpy/memset/sync by category);
    a class is left out when any of its activities is not in the table."""
    labels, totals, unknown = hand_labels(), {}, set()
    for a in acts:
        c = a.kind if a.kind in ("memcpy", "memset", "sync") else labels.get(a.name)
        if c is None:
            unknown.add(a.kind)
            continue
        totals[c] = totals.get(c, 0) + a.dur
    return {c: v for c, v in totals.items() if not (c.startswith("comm") and "comm" in unknown)}


def launches(acts: list[Act], t: Trace, delay_cutoff_ns: int = 100_000, runtime_cutoff_ns: int = 50_000) -> dict:
    """Launch figures: delays, launch-bound kernels, the stream queue (an activity is queued when earlier work
    on its stream had not ended when its launch call did), outliers and the queue depth per step."""
    launched = [a for a in acts if a.kind != "sync" and a.launch is not None]
    free = _stream_free(t)
    delay = [a.start - (a.launch[0] + a.launch[1]) for a in launched]
    queued = [free.get(id(a), None) is not None and free[id(a)] > a.launch[0] + a.launch[1] for a in launched]
    idle = [d for d, q in zip(delay, queued) if not q]
    lends = sorted(a.launch[0] + a.launch[1] for a in launched)
    starts = sorted(a.start for a in launched)
    depth: dict[int, list[int]] = {}
    for a in launched:
        at = a.launch[0] + a.launch[1]
        d = max(bisect.bisect_right(lends, at) - bisect.bisect_right(starts, at), 0)
        depth.setdefault(-1 if a.step is None else a.step, []).append(d)
    return {
        "activities": len([a for a in acts if a.kind != "sync"]),
        "with_launch": len(launched),
        "median_delay_ns": percentile(delay, 50),
        "p95_delay_ns": percentile(delay, 95),
        "max_delay_ns": max(delay) if delay else None,
        "negative_delays": sum(d < 0 for d in delay),
        "launch_bound": sum(a.kind in ("kernel", "comm") and a.dur < a.launch[1] for a in launched),
        "queued": sum(queued),
        "median_idle_delay_ns": percentile(idle, 50),
        "delay_outliers": sum(d > delay_cutoff_ns for d in idle),
        "runtime_outliers": sum(a.launch[1] > runtime_cutoff_ns for a in launched),
        "queue_depth": [{"step": s, "max": max(d), "mean": sum(d) / len(d)} for s, d in sorted(depth.items())],
    }


def _stream_free(t: Trace) -> dict[int, int]:
    """For each activity (by id), the latest end of the busy activities before it on its stream (all steps)."""
    out: dict[int, int] = {}
    by: dict[tuple, list[tuple[int, int, Act]]] = {}
    for i, a in enumerate(t.acts):
        if a.kind in BUSY:
            by.setdefault(a.stream, []).append((a.start, i, a))
    for items in by.values():
        reach = None
        for _, _, a in sorted(items, key=lambda x: (x[0], x[1])):
            if reach is not None:
                out[id(a)] = reach
            reach = a.end if reach is None else max(reach, a.end)
    return out
