"""Evidence against a rank, and the suspects it names: the vocabulary of `tracekit hang`."""

from __future__ import annotations

from dataclasses import dataclass

# kind -> directness (1 = most direct). "ahead": the few ranks past a collective the rest never reached.
DIRECTNESS = {"missing": 1, "ahead": 2, "mismatch": 2, "late": 3, "not_started": 3, "absent": 4, "behind": 5}


@dataclass(frozen=True, slots=True)
class Evidence:
    kind: str  # a key of DIRECTNESS, or "timed_out" (a group fact that names no suspect)
    group: str
    dimension: str
    seq: int  # the collective's sequence number in the group (-1: none)
    ranks: tuple[int, ...]
    text: str

    @property
    def directness(self) -> int:
        return DIRECTNESS.get(self.kind, 9)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "directness": self.directness,
            "group": self.group,
            "dimension": self.dimension,
            "seq": self.seq,
            "ranks": list(self.ranks),
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class Suspect:
    rank: int
    directness: int
    evidence: tuple[str, ...]  # the texts of the evidence naming it, most direct first

    def to_dict(self) -> dict:
        return {"rank": self.rank, "directness": self.directness, "evidence": list(self.evidence)}


def suspects(evidence: list[Evidence]) -> tuple[Suspect, ...]:
    named: dict[int, list[Evidence]] = {}
    for ev in evidence:
        if ev.kind in DIRECTNESS:
            for r in ev.ranks:
                named.setdefault(int(r), []).append(ev)
    out = [Suspect(r, min(e.directness for e in evs), tuple(e.text for e in evs)) for r, evs in named.items()]
    return tuple(sorted(out, key=lambda s: (s.directness, -len(s.evidence), s.rank)))
