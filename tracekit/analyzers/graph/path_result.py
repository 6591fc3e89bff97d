"""What a step's critical path says (tracekit.analyzers.graph.critical_path finds it): its segments, its length split
by kind, rank, dimension and collective, how much of it the graph explains, the host waits inferred in the step,
and the verdict: which kind bounds the step, in one line.

``bound`` is the kind group that carries at least half of the path: ``device`` (compute, memcpy/memset and the gaps
between device work), ``communication`` (transfer and waiting in collectives) or ``host``; ``mixed`` when none
does. The threshold is the idle breakdown's for ``host_bound`` (half the step). A step whose device (on the rank
where the path ends) is busy for DEVICE_BUSY_SHARE of it or more is never host-bound, whatever the path: a host
infinitely fast would save at most the device's idle time. Where the path says host all the same, it runs through
host time that waited on something the trace does not link (another thread, an unrecorded wait): the step is
called device-bound and the verdict says so (tests/integration/test_critical_path_consistency.py holds the path,
the idle breakdown and the launch statistics together on every GPU trace).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .structure import KINDS, WAIT_RULES

BOUND_SHARE = 0.5  # a kind group carrying this share of the path bounds the step
DEVICE_BUSY_SHARE = 0.9  # a step whose device is busy this share of it is not host-bound
UNEXPLAINED_SHARE = 0.1  # the verdict says so when more of the path than this is unexplained
_GROUPS = {"compute": "device", "memcpy": "device", "idle": "device", "comm_transfer": "communication"}
_GROUPS.update(comm_wait="communication", host="host")


class Segment(NamedTuple):
    """One stretch of the path. A named tuple rather than a frozen dataclass: a long step has hundreds of thousands
    of segments, and a frozen dataclass's __init__ (one object.__setattr__ per field) cost ~3 µs each."""

    rank: int
    lane: str  # "thread 123", "stream 7", "gloo thread 9" or "" for residuals between ranks
    name: str
    start_ns: int  # on the reference rank's clock, absolute
    dur_ns: int
    kind: str
    dimension: str = ""
    unexplained: bool = False  # a residual gap larger than the tolerance: no recorded dependency accounts for it

    def to_dict(self) -> dict:
        d = {
            "rank": self.rank,
            "lane": self.lane,
            "name": self.name,
            "start_us": self.start_ns / 1e3,
            "dur_us": self.dur_ns / 1e3,
            "kind": self.kind,
        }
        if self.dimension:
            d["dimension"] = self.dimension
        if self.unexplained:
            d["unexplained"] = True
        return d


@dataclass(frozen=True, slots=True)
class Crossing:
    """The path leaves rank ``from_rank`` at a collective for ``to_rank``, the last to arrive."""

    from_rank: int
    to_rank: int
    name: str
    dimension: str
    wait_ns: int  # how long from_rank waited in the collective for to_rank


@dataclass(frozen=True, slots=True)
class StepPath:
    step: int
    length_ns: int
    by_kind_ns: dict[str, int]
    by_dimension_ns: dict[str, int]
    by_rank_kind_ns: dict[tuple[int, str], int]
    by_collective_ns: dict[str, int]  # "dimension op" -> transfer on the path (e.g. "tp all_gather")
    segments: tuple[Segment, ...]
    crossings: tuple[Crossing, ...]
    unexplained_ns: int = 0  # residual gaps larger than the tolerance on the path
    host_waits: dict[str, int] = field(default_factory=dict)  # inferred host waits for the device in the step, by rule
    complete: bool = True  # every rank's analysis holds the step whole
    device_busy_ns: int = 0  # the union of device activity in the window of the rank where the path ends

    @property
    def explained_ns(self) -> int:
        return self.length_ns - self.unexplained_ns

    @property
    def bound(self) -> str:
        return bound_of(self.length_ns, self.by_kind_ns, self.device_busy_ns)

    @property
    def verdict(self) -> str:
        text = f"step {self.step}: {self.bound}-bound: " if self.bound != "mixed" else f"step {self.step}: mixed: "
        text += _shares(self.length_ns, self.by_rank_kind_ns, self.by_collective_ns, self.crossings)
        if self.bound == "device" and bound_of(self.length_ns, self.by_kind_ns) == "host":
            text += (
                f"; the device is busy {round(100 * self.device_busy_ns / self.length_ns)} % of the step, so the host time "
                "on the path waited on something the trace does not link (another thread, an unrecorded wait)"
            )
        return text + unexplained_note(self.length_ns, self.unexplained_ns)

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "length_us": self.length_ns / 1e3,
            "by_kind": {k: self.by_kind_ns.get(k, 0) / 1e3 for k in KINDS},
            "by_dimension": {k: v / 1e3 for k, v in sorted(self.by_dimension_ns.items())},
            "by_collective": {k: v / 1e3 for k, v in sorted(self.by_collective_ns.items())},
            "bound": self.bound,
            "device_busy_us": self.device_busy_ns / 1e3,
            "explained_us": self.explained_ns / 1e3,
            "unexplained_us": self.unexplained_ns / 1e3,
            "host_waits": {k: self.host_waits[k] for k in WAIT_RULES if self.host_waits.get(k)},
            "complete": self.complete,
            "verdict": self.verdict,
            "segments": [s.to_dict() for s in self.segments],
        }


def bound_of(length_ns: int, by_kind_ns: dict[str, int], device_busy_ns: int = 0) -> str:
    """The kind group (device, communication, host) carrying at least BOUND_SHARE of the path, else "mixed"; never
    "host" where the device was busy DEVICE_BUSY_SHARE of the step."""
    groups: dict[str, int] = {}
    for k, v in by_kind_ns.items():
        groups[_GROUPS[k]] = groups.get(_GROUPS[k], 0) + v
    best = max(groups.items(), key=lambda kv: kv[1], default=("mixed", 0))
    bound = best[0] if length_ns > 0 and best[1] >= BOUND_SHARE * length_ns else "mixed"
    if bound == "host" and device_busy_ns >= DEVICE_BUSY_SHARE * length_ns:
        return "device"
    return bound


def unexplained_note(length_ns: int, unexplained_ns: int) -> str:
    if length_ns <= 0 or unexplained_ns <= UNEXPLAINED_SHARE * length_ns:
        return ""
    return f"; {round(100 * unexplained_ns / length_ns)} % of the path is unexplained (gaps no recorded dependency accounts for)"


@dataclass(frozen=True, slots=True)
class CriticalPaths:
    steps: tuple[StepPath, ...]
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """What bounds the run: the kinds summed over the complete steps (all of them when none is complete)."""
        steps = [s for s in self.steps if s.complete] or list(self.steps)
        if not steps:
            return "no steps"
        total = sum(s.length_ns for s in steps)
        rk: dict[tuple[int, str], int] = {}
        dims: dict[str, int] = {}
        kinds: dict[str, int] = {}
        for s in steps:
            for k, v in s.by_rank_kind_ns.items():
                rk[k] = rk.get(k, 0) + v
            for k2, v in s.by_collective_ns.items():
                dims[k2] = dims.get(k2, 0) + v
            for k3, v in s.by_kind_ns.items():
                kinds[k3] = kinds.get(k3, 0) + v
        cross = tuple(c for s in steps for c in s.crossings)
        n = len(steps)
        bound = bound_of(total, kinds)
        head = f"{n} step{'s' if n != 1 else ''}: " + (f"{bound}-bound: " if bound != "mixed" else "mixed: ")
        return head + _shares(total, rk, dims, cross) + unexplained_note(total, sum(s.unexplained_ns for s in steps))

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "steps": [s.to_dict() for s in self.steps], "notes": list(self.notes)}


def _shares(total: int, by_rank_kind: dict[tuple[int, str], int], colls: dict[str, int], crossings: Sequence[Crossing]) -> str:
    """ "61 % compute on rank 2, 22 % tp all_gather transfer on rank 2, 8 % host on rank 3; the path waits for
    rank 3 at 4 collectives (...)": the five largest (rank, kind) shares of the path, those under 1 % left out."""
    if total <= 0:
        return "empty"
    labels = {"idle": "idle (gaps between device work)", "comm_wait": "waiting in collectives", "memcpy": "memcpy/memset"}
    if colls:
        d, _ = max(colls.items(), key=lambda kv: kv[1])
        labels["comm_transfer"] = f"{d} transfer" if len(colls) == 1 else f"transfer (most in {d})"
    parts = []
    for (r, k), v in sorted(by_rank_kind.items(), key=lambda kv: -kv[1]):
        pct = round(100 * v / total)
        if pct >= 1:
            parts.append(f"{pct} % {labels.get(k, k)}" + (f" on rank {r}" if r >= 0 else ""))
    text = ", ".join(parts[:5]) + (f" and {len(parts) - 5} smaller shares" if len(parts) > 5 else "")
    if crossings:
        late: dict[int, int] = {}
        for c in crossings:
            late[c.to_rank] = late.get(c.to_rank, 0) + c.wait_ns
        r, w = max(late.items(), key=lambda kv: kv[1])
        n = sum(1 for c in crossings if c.to_rank == r)
        text += f"; the path waits for rank {r} at {n} collective{'s' if n > 1 else ''} ({w / 1e3:,.1f} µs of waiting)"
    return text
