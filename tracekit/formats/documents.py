"""The smaller documents beside a summary: the gate's verdict (``tracekit.gate/1``, what ``tracekit check --json``
writes and ``tracekit report --verdict`` reads), the diff (``tracekit.diff/1``, what ``tracekit diff --format json``
writes) and the timeline (``tracekit.timeline/1``, what ``analyze --timeline-out`` writes). docs/report-inputs.md
describes them; the gate's results are encoded from these Structs through formats.core (never a NaN token)."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..errors import ConfigError, SummaryFormatError
from . import core
from .contract import DIFF_SCHEMA, GATE_SCHEMA, TIMELINE_SCHEMA
from .summary import Int, Num, Rank

VERDICT_SCHEMA, TIMELINE_SCHEMA = GATE_SCHEMA, TIMELINE_SCHEMA
VERDICT_FAMILY, VERDICT_MAJOR = core.family_major(VERDICT_SCHEMA)
TIMELINE_FAMILY, TIMELINE_MAJOR = core.family_major(TIMELINE_SCHEMA)


class _Doc(msgspec.Struct, kw_only=True):
    pass


class StatDoc(_Doc, kw_only=True):
    """A gate statistic over steps (tracekit.gate.stats.Stat.to_dict)."""

    median: Num | None | UnsetType = UNSET
    min: Num | None | UnsetType = UNSET
    max: Num | None | UnsetType = UNSET
    q1: Num | None | UnsetType = UNSET
    q3: Num | None | UnsetType = UNSET
    samples: Int | None | UnsetType = UNSET
    basis: str | None | UnsetType = UNSET


class CheckDoc(_Doc, kw_only=True):
    """One check of a verdict: the gate's own form, or the plain documented form (value/baseline/budget)."""

    kind: str | UnsetType = UNSET
    name: str | UnsetType = UNSET
    passed: bool
    message: str | UnsetType = UNSET
    metric: str | UnsetType = UNSET
    scope: str | UnsetType = UNSET
    baseline: StatDoc | Num | str | None | UnsetType = UNSET
    current: StatDoc | Num | None | UnsetType = UNSET
    value: Num | str | None | UnsetType = UNSET
    limit: Num | None | UnsetType = UNSET
    op: str | UnsetType = UNSET
    change: Num | None | UnsetType = UNSET
    budget: str | None | UnsetType = UNSET


class VerdictDoc(_Doc, kw_only=True):
    schema: str | UnsetType = UNSET
    passed: bool
    current: str | UnsetType = UNSET
    baseline: str | None | UnsetType = UNSET
    run: dict[str, Any] | UnsetType = UNSET
    notes: list[str] | UnsetType = UNSET
    warnings: list[str] | UnsetType = UNSET
    checks: list[CheckDoc] = []


class DiffFigures(_Doc, kw_only=True):
    """One side of a diff row: medians over steps (per rank, then across ranks). A key is absent where that row
    kind does not carry it (the whole-run row has comm, hidden and exposed; a call site no count) and null where
    the run has no value (wait and transfer of a single-rank run, a row only the other side has)."""

    count: Num | None | UnsetType = UNSET
    bytes: Num | None | UnsetType = UNSET
    comm_us: Num | None | UnsetType = UNSET
    hidden_comm_us: Num | None | UnsetType = UNSET
    exposed_comm_us: Num | None | UnsetType = UNSET
    wait_us: Num | None | UnsetType = UNSET
    transfer_us: Num | None | UnsetType = UNSET


class DiffRowDoc(_Doc, kw_only=True):
    """A dimension/op, the whole run or a call site on both sides, and the split of its exposed change."""

    label: str
    a: DiffFigures
    b: DiffFigures
    exposed_delta_us: Num | None  # null only where the split overflowed (absurd inputs)
    more_comm_us: Num | None
    less_overlap_us: Num | None
    reasons: list[str] = []


class DiffDoc(_Doc, kw_only=True):
    """``tracekit diff A B --format json`` (tracekit.gate.diff.DiffResult)."""

    schema: str
    a: str
    b: str
    notes: list[str] = []
    by_dimension: list[DiffRowDoc] = []
    by_call_site: list[DiffRowDoc] = []


Interval = tuple[Num, Num, Literal["compute", "hidden", "exposed"]]


class TimelineRank(_Doc, kw_only=True):
    """One rank's pieces, in µs of its own trace time base. Since 1.1: its ``baseTimeNanoseconds`` (``base_ns``),
    clock offset (``offset_ns``) and ``shift_ns`` (base − offset − the reference's base: own µs + shift_ns / 1000
    is µs on the common clock); a 1.0 document has none and is drawn per rank from its own window start."""

    rank: Rank
    step: Int | None | UnsetType = UNSET
    window_us: Annotated[list[Num], msgspec.Meta(max_length=2)] | UnsetType = UNSET
    intervals: list[Interval] = []
    base_ns: Int | UnsetType = UNSET
    offset_ns: Int | UnsetType = UNSET
    shift_ns: Int | UnsetType = UNSET


class TimelineClock(_Doc, kw_only=True):
    """The common clock (1.1): the reference rank's, in µs from its ``baseTimeNanoseconds`` (``base_ns``)."""

    reference_rank: Rank
    base_ns: Int


class TimelineSegment(_Doc, kw_only=True):
    """A critical-path segment as the summary writes it, ``start_us`` on the common clock (1.1)."""

    rank: Rank | None = None
    lane: str = ""
    name: str = ""
    start_us: Num
    # negative where the measurement contradicts causality by a few µs (a sync that returns before the kernel it
    # waited for ends: clocks, rounding); the path's segments still add up to its length, and drawing skips them
    dur_us: Annotated[float, msgspec.Meta(ge=-1e18, le=1e18)] | Annotated[int, msgspec.Meta(ge=-(2**62), le=2**62)]
    kind: str
    dimension: str | UnsetType = UNSET


class TimelinePath(_Doc, kw_only=True):
    step: Int | None = None
    segments: list[TimelineSegment] = []
    note: str | UnsetType = UNSET


class TimelineDoc(_Doc, kw_only=True):
    schema: str
    ranks: list[TimelineRank] = []
    clock: TimelineClock | UnsetType = UNSET
    critical_path: TimelinePath | UnsetType = UNSET
    ranks_total: Int | UnsetType = UNSET  # when ``ranks`` holds a selection: how many ranks the run has
    selection: str | UnsetType = UNSET  # and which ranks were drawn, why


_VERDICT_FIX = "pass the file `tracekit check --json FILE` wrote"


def read_verdict(path: str | os.PathLike) -> VerdictDoc:
    """The verdict in the file at ``path`` (the gate's own form, or the plain documented form without a schema)."""
    doc = core.read(path, VerdictDoc, error=ConfigError, fix=_VERDICT_FIX)  # the plain form has no schema
    return _checked_verdict(doc, os.fspath(path))


def verdict_from_builtins(data: Any, source: str = "verdict") -> VerdictDoc:
    """A verdict given as dicts (``HtmlReporter.render(verdict=...)``) as the Struct a file gives."""
    return _checked_verdict(core.convert(data, VerdictDoc, source=source, error=ConfigError, fix=_VERDICT_FIX), source)


def _checked_verdict(doc: VerdictDoc, source: str) -> VerdictDoc:
    if doc.schema is not UNSET and not core.schema_accepted(doc.schema, VERDICT_FAMILY, VERDICT_MAJOR):
        raise ConfigError(f"{source}: schema is {doc.schema!r}, expected {VERDICT_SCHEMA!r}; {_VERDICT_FIX}")
    return doc


def read_diff(path: str | os.PathLike) -> DiffDoc:
    """A diff written by ``tracekit diff --format json``, validated (for tools and tests that read it back)."""
    fix = "pass the file `tracekit diff A B --format json` wrote"
    doc = core.read(path, DiffDoc, error=SummaryFormatError, fix=fix, schema=core.family_major(DIFF_SCHEMA))
    if not core.schema_accepted(doc.schema, *core.family_major(DIFF_SCHEMA)):
        raise SummaryFormatError(f"{os.fspath(path)}: schema is {doc.schema!r}, expected {DIFF_SCHEMA!r}; {fix}")
    return doc


_TIMELINE_FIX = "pass the analyzer's timeline output (`tracekit analyze --timeline-out FILE`) unchanged"


def read_timeline(path: str | os.PathLike) -> TimelineDoc:
    doc = core.read(path, TimelineDoc, error=ConfigError, fix=_TIMELINE_FIX, schema=(TIMELINE_FAMILY, TIMELINE_MAJOR))
    return _checked_timeline(doc, os.fspath(path))


def timeline_from_builtins(data: Any, source: str = "timeline") -> TimelineDoc:
    """A timeline held as dicts (``Analysis.timeline()``, a summary's ``timeline``, the reporter's ``timeline=``)
    as the Struct a file gives, with the same checks: the report draws one type whichever way it came."""
    doc = core.convert(
        data, TimelineDoc, source=source, error=ConfigError, fix=_TIMELINE_FIX, schema=(TIMELINE_FAMILY, TIMELINE_MAJOR)
    )
    return _checked_timeline(doc, source)


def _checked_timeline(doc: TimelineDoc, source: str) -> TimelineDoc:
    """What the types cannot say: the schema, a shift for every rank of a 1.1 document, no interval ending before
    it starts."""
    if not core.schema_accepted(doc.schema, TIMELINE_FAMILY, TIMELINE_MAJOR):
        raise ConfigError(f"{source}: schema is {doc.schema!r}, expected {TIMELINE_SCHEMA!r}; {_TIMELINE_FIX}")
    for r in doc.ranks:
        if doc.clock is not UNSET and r.shift_ns is UNSET:
            raise ConfigError(f"{source}: rank {r.rank}: no shift_ns though the document has a clock (1.1); {_TIMELINE_FIX}")
        for iv in r.intervals:
            if not iv[1] >= iv[0]:
                raise ConfigError(f"{source}: rank {r.rank}: interval {list(iv)!r} ends before it starts; {_TIMELINE_FIX}")
    return doc
