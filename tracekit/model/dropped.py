"""Events the loader dropped, kept as evidence: how many for each reason, and where each one lay.

A figure computed without an event that was in the trace is computed from incomplete data. The loader drops an
event it cannot read (no ``ph``, a field of the wrong type, a time that is missing, non-finite, negative or
beyond the ns range) or cannot believe (a duration longer than the whole trace, an end far past its last host
event); each such event is counted here once, under one reason, with its start (where the trace still says it)
and its correlation id (a device event's link to its launch). The step analysis (``analyzers/comm/steps.py``)
then marks every step that lost one of them incomplete: the step its launch belongs to, else the window its
start falls in, else -- its time unknown -- every step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

UNKNOWN_NS = -(2**63)  # a start that could not be read: the event may have belonged to any step
MAX_PLACED = 10_000  # events recorded one by one per trace; past this they count as placed nowhere (every step)

# reason -> how a warning or a step's partial_reason names it (one reason per dropped event)
REASONS: dict[str, str] = {
    "malformed": "malformed (no 'ph', an unknown 'ph', or fields of the wrong type)",
    "times": "missing, non-finite or negative times or durations",
    "range": "times beyond ±2**62 ns",
    "implausible": "implausible (a duration longer than the whole trace, or an end far past its last host event)",
    "begin_end": "begin/end pairs (ph 'B'/'E'), which tracekit does not read",
    "corrupt": "unreadable bytes (the events around a corrupt byte)",
}


@dataclass(frozen=True, slots=True)
class DroppedEvents:
    """``counts``: (reason, events) for every reason with a drop; the records ``reason``/``ts_ns``/``correlation``
    (aligned) for the events whose place is known (a start, or a correlation id >= 0). An event counted but not
    recorded (its time and correlation unreadable, or past ``MAX_PLACED``) may belong to any step."""

    counts: tuple[tuple[str, int], ...] = ()
    reason: tuple[str, ...] = ()
    ts_ns: tuple[int, ...] = ()
    correlation: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)

    def __bool__(self) -> bool:
        return self.total > 0

    def unplaced(self) -> dict[str, int]:
        """Per reason, the events counted but not recorded: their step is unknown."""
        placed: dict[str, int] = {}
        for r in self.reason:
            placed[r] = placed.get(r, 0) + 1
        return {r: n - placed.get(r, 0) for r, n in self.counts if n > placed.get(r, 0)}

    def plus(self, reason: str, count: int, ts_ns: Iterable[int] = (), correlation: Iterable[int] = ()) -> DroppedEvents:
        """These records added: ``count`` events of ``reason``, of which those in ``ts_ns``/``correlation``
        (aligned; UNKNOWN_NS and -1 where absent) are placed; records that say nothing are not kept."""
        if count <= 0:
            return self
        counts = dict(self.counts)
        counts[reason] = counts.get(reason, 0) + int(count)
        reasons, starts, corrs = list(self.reason), list(self.ts_ns), list(self.correlation)
        for t, c in zip(ts_ns, correlation):
            if len(starts) >= MAX_PLACED:
                break
            if t != UNKNOWN_NS or c >= 0:
                reasons.append(reason)
                starts.append(int(t))
                corrs.append(int(c))
        return DroppedEvents(tuple(counts.items()), tuple(reasons), tuple(starts), tuple(corrs))

    def merged(self, other: DroppedEvents) -> DroppedEvents:
        """``other``'s drops after these (the next piece of a split trace): the records in file order."""
        counts = dict(self.counts)
        for reason, n in other.counts:
            counts[reason] = counts.get(reason, 0) + n
        room = max(0, MAX_PLACED - len(self.reason))
        return DroppedEvents(
            tuple(counts.items()),
            self.reason + other.reason[:room],
            self.ts_ns + other.ts_ns[:room],
            self.correlation + other.correlation[:room],
        )

    def ordered(self) -> DroppedEvents:
        """The records sorted (start, reason, correlation): one order whatever pieces the trace was read in."""
        rows = sorted(zip(self.ts_ns, self.reason, self.correlation))
        return DroppedEvents(
            tuple(sorted(self.counts)),
            tuple(r for _, r, _ in rows),
            tuple(t for t, _, _ in rows),
            tuple(c for _, _, c in rows),
        )

    def shifted(self, base_ns: int) -> DroppedEvents:
        """The starts moved by ``base_ns`` (the trace's baseTimeNanoseconds, added to every time column)."""
        if not base_ns:
            return self
        ts = tuple(t if t == UNKNOWN_NS else t + base_ns for t in self.ts_ns)
        return DroppedEvents(self.counts, self.reason, ts, self.correlation)

    def describe(self) -> str:
        """'3 malformed (...), 1 implausible (...)'."""
        return ", ".join(f"{n} {REASONS.get(r, r)}" for r, n in self.counts)

    def to_dict(self) -> dict:
        return {
            "counts": dict(self.counts),
            "events": [[r, t, c] for r, t, c in zip(self.reason, self.ts_ns, self.correlation)],
        }

    @classmethod
    def from_dict(cls, d: Mapping | None) -> DroppedEvents:
        if not d:
            return cls()
        events = list(d.get("events", ()))
        return cls(
            tuple((str(r), int(n)) for r, n in dict(d.get("counts", {})).items()),
            tuple(str(e[0]) for e in events),
            tuple(int(e[1]) for e in events),
            tuple(int(e[2]) for e in events),
        )


def short_reasons(counts: Mapping[str, int]) -> str:
    """'2 malformed, 1 implausible' (the keys of REASONS, for a step's partial_reason)."""
    return ", ".join(f"{n} {r.replace('_', '/')}" for r, n in counts.items() if n)
