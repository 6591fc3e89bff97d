"""The results of the hang analysis: each group's state and the report ``tracekit hang`` renders. A module of its
own, importing no pandas, so that the reporters' table can name the document type cheaply."""

from __future__ import annotations

from dataclasses import dataclass, field

from .evidence import Evidence, Suspect
from .groups import Group


@dataclass(frozen=True, slots=True)
class GroupState:
    group: Group
    dumped: tuple[int, ...]  # members with a dump
    absent: tuple[int, ...]  # members without one
    last_seq: dict[int, int]  # member -> its last collective's sequence number (0: none; -1: unknown, ring wrapped)
    reached_seq: int  # the last collective every dumped member reached (0: none)
    reached_what: str  # its op, sizes and the user's frame, as one member recorded it
    next_seq: int  # reached + 1 when some member entered it, else -1
    entered_next: tuple[int, ...]
    missing_next: tuple[int, ...]
    completed: tuple[int, ...] | None  # members that completed reached_seq; None: the backend records no completion
    status: str  # "consistent", "hang", "mismatch"
    last_p2p_seq: dict[int, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            **self.group.to_dict(),
            "status": self.status,
            "dumped": list(self.dumped),
            "absent": list(self.absent),
            "last_seq_by_rank": {str(r): s for r, s in sorted(self.last_seq.items())},
            "last_p2p_seq_by_rank": {str(r): s for r, s in sorted(self.last_p2p_seq.items())},
            "reached_seq": self.reached_seq,
            "reached": self.reached_what,
            "next_seq": self.next_seq,
            "entered_next": list(self.entered_next),
            "missing_next": list(self.missing_next),
            "completed": None if self.completed is None else list(self.completed),
        }


@dataclass(frozen=True, slots=True)
class HangReport:
    """The document of ``tracekit hang`` (to_dict: suspect_ranks, groups, mismatches, evidence)."""

    groups: tuple[GroupState, ...]
    evidence: tuple[Evidence, ...]
    suspects: tuple[Suspect, ...]
    mismatches: tuple[dict, ...]
    ranks: tuple[int, ...]
    expected_ranks: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    directory: str = ""

    @property
    def hung(self) -> bool:
        """A hang or a mismatch was found (``tracekit hang`` exits 1)."""
        return bool(self.suspects or self.mismatches) or any(g.status != "consistent" for g in self.groups)

    def to_dict(self) -> dict:
        return {
            "schema": "tracekit.hang/1",
            "directory": self.directory,
            "verdict": "hang" if self.hung else "consistent",
            "suspect_ranks": [s.to_dict() for s in self.suspects],
            "groups": [g.to_dict() for g in self.groups],
            "mismatches": list(self.mismatches),
            "evidence": [e.to_dict() for e in self.evidence],
            "ranks": list(self.ranks),
            "expected_ranks": list(self.expected_ranks),
            "absent_ranks": [r for r in self.expected_ranks if r not in self.ranks],
            "warnings": list(self.warnings),
        }
