"""The results of the Flight Recorder timing analysis (``tracekit analyze DIR`` on dumps): per group, per parallel
dimension, the stragglers by arrival and by the inversion rule, the most skewed collectives, and, when Kineto
traces of the run sit beside the dumps, how the two agree. Times in µs in ``to_dict`` (``tracekit.flight_timing/1``),
as in the summary. No pandas here: the reporters' table names the document type cheaply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .groups import Group

if TYPE_CHECKING:
    from ..comm.collectives import Straggler

SCHEMA = "tracekit.flight_timing/1"


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e3


@dataclass(frozen=True, slots=True)
class Inversion:
    rank: int
    shortest_count: int  # collectives in which this rank had the shortest duration of its group
    mean_shorter_ns: float  # by how much, against the mean of its peers

    def to_dict(self) -> dict:
        return {"rank": self.rank, "shortest_count": self.shortest_count, "mean_shorter_us": self.mean_shorter_ns / 1e3}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Figures:
    instances: int
    matched: int  # collectives seen on two or more ranks (only they have a wait and a skew)
    wait_ns: float
    wait_by_rank_ns: Mapping[int, float]
    mean_skew_ns: float | None
    mean_interval_ns: float | None
    mean_queue_ns: float | None
    mean_duration_ns: float | None
    mean_transfer_ns: float | None
    mean_gap_ns: float | None
    stragglers: tuple[Straggler, ...] = ()

    def figures(self) -> dict:
        return {
            "instances": self.instances,
            "matched": self.matched,
            "wait_us": self.wait_ns / 1e3,
            "wait_by_rank_us": {str(r): w / 1e3 for r, w in sorted(self.wait_by_rank_ns.items())},
            "mean_skew_us": _us(self.mean_skew_ns),
            "mean_interval_us": _us(self.mean_interval_ns),
            "mean_queue_us": _us(self.mean_queue_ns),
            "mean_duration_us": _us(self.mean_duration_ns),
            "mean_transfer_us": _us(self.mean_transfer_ns),
            "mean_gap_us": _us(self.mean_gap_ns),
            "stragglers": [s.to_dict() for s in self.stragglers],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupTiming(_Figures):
    group: Group
    ops: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {**self.group.to_dict(), "ops": list(self.ops), **self.figures()}


@dataclass(frozen=True, slots=True, kw_only=True)
class DimensionTiming(_Figures):
    dimension: str
    groups: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"dimension": self.dimension, "groups": list(self.groups), **self.figures()}


@dataclass(frozen=True, slots=True)
class DimensionAgreement:
    """One dimension's common collectives, as Kineto and the Flight Recorder time them."""

    dimension: str
    collectives: int
    kineto_wait_ns: float  # every rank's wait, summed
    flight_wait_ns: float
    median_abs_diff_ns: float  # per rank and collective
    last_arrival_agreement: float  # share of the collectives whose last arriver both name
    wait_by_rank_ns: Mapping[int, tuple[float, float]]  # rank -> (Kineto, FR)
    kineto_straggler: int = -1  # the rank whose late arrivals caused the most waiting, by Kineto (-1: none)
    flight_straggler: int = -1  # and by the Flight Recorder

    def to_dict(self) -> dict:
        return {
            "dimension": self.dimension,
            "collectives": self.collectives,
            "kineto_wait_us": self.kineto_wait_ns / 1e3,
            "flight_wait_us": self.flight_wait_ns / 1e3,
            "median_abs_diff_us": self.median_abs_diff_ns / 1e3,
            "last_arrival_agreement": self.last_arrival_agreement,
            "kineto_straggler": self.kineto_straggler,
            "flight_straggler": self.flight_straggler,
            "wait_by_rank_us": {
                str(r): {"kineto": k / 1e3, "flight": f / 1e3} for r, (k, f) in sorted(self.wait_by_rank_ns.items())
            },
        }


@dataclass(frozen=True, slots=True)
class KinetoAgreement:
    dimensions: tuple[DimensionAgreement, ...]
    seq_offsets: Mapping[str, int]  # "rank:group" -> FR seq - Kineto seq
    common: int  # collectives matched in both
    kineto_collectives: int  # matched collectives of the Kineto analysis
    op_mismatches: int  # found in both under one number, with ops that do not agree (left out)

    def to_dict(self) -> dict:
        return {
            "common": self.common,
            "kineto_collectives": self.kineto_collectives,
            "op_mismatches": self.op_mismatches,
            "seq_offsets": dict(self.seq_offsets),
            "dimensions": [d.to_dict() for d in self.dimensions],
        }


@dataclass(frozen=True, slots=True)
class FlightTiming:
    directory: str
    ranks: tuple[int, ...]
    groups: tuple[GroupTiming, ...]
    dimensions: tuple[DimensionTiming, ...]
    stragglers: tuple[Straggler, ...]
    inversions: tuple[Inversion, ...]
    recorded: Mapping[str, bool]  # which timestamps the backend filled: arrival, queue, duration, completion
    collectives: tuple[dict, ...]  # the most skewed collectives (ns fields)
    entries: int
    warnings: tuple[str, ...] = ()
    kineto: KinetoAgreement | None = None  # when Kineto traces of the run sit beside the dumps
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "directory": self.directory,
            "ranks": list(self.ranks),
            "recorded": dict(self.recorded),
            "entries": self.entries,
            "dimensions": [d.to_dict() for d in self.dimensions],
            "groups": [g.to_dict() for g in self.groups],
            "stragglers": [s.to_dict() for s in self.stragglers],
            "inversion": [i.to_dict() for i in self.inversions],
            "collectives": [_row_us(r) for r in self.collectives],
            "kineto": None if self.kineto is None else self.kineto.to_dict(),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def _row_us(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if k.endswith("_ns") and k != "created_ns":
            out[k[:-3] + "_us"] = _us(v)
        else:
            out[k] = v
    return out
