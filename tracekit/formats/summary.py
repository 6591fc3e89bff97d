"""``tracekit.summary/1`` as typed Structs (docs/summary-schema.md is the prose of the same contract).

The analyzers build the summary; the gate, ``diff`` and ``report --summary`` read it back through
:func:`read_summary`, so a summary of the wrong shape (a rank that is a string, ``ranks`` as a list of strings,
``layout`` as a list, no ``totals``), a NaN or an absurd number is one line naming the file and the field, never a
traceback and never a silently passing gate. Fields a minor revision adds are tolerated (and dropped).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from ..errors import SummaryFormatError, TracekitError
from . import core

FAMILY = "tracekit.summary"
MAJOR = 1
SCHEMA = f"{FAMILY}/{MAJOR}"
FIX = "write it with `tracekit baseline` or `tracekit analyze --format json`"

# Bounds that no real run reaches: 10^18 µs is 31,000 years (absolute start times are epoch µs, ~1.7e15);
# 2^62 bytes is 4 EiB. They keep 1e308 out of the gate's arithmetic, where it overflows to inf and every
# comparison turns into nan. Rank -1 is how summaries before 0.2 wrote "no distributedInfo.rank".
_US = msgspec.Meta(ge=-1e18, le=1e18)
_INT = msgspec.Meta(ge=-(2**62), le=2**62)
Num = Annotated[int, _INT] | Annotated[float, _US]
Int = Annotated[int, _INT]
Rank = Annotated[int, msgspec.Meta(ge=-1, le=2**31)]


class _Doc(msgspec.Struct, kw_only=True):
    """Base of every section. Optional fields default to UNSET, so a field absent from the file stays absent
    and a null stays null when the document is turned back into builtins."""


class StepFigures(_Doc, kw_only=True):
    """One step's figures (``ranks[].steps[]``) or their sums (``ranks[].totals``, without ``step``)."""

    step: Int | None | UnsetType = UNSET
    wall_us: Num | None | UnsetType = UNSET
    compute_us: Num | None | UnsetType = UNSET
    comm_us: Num | None | UnsetType = UNSET
    hidden_comm_us: Num | None | UnsetType = UNSET
    exposed_comm_us: Num | None | UnsetType = UNSET
    overlap_ratio: Num | None | UnsetType = UNSET
    idle_us: Num | None | UnsetType = UNSET
    memcpy_us: Num | None | UnsetType = UNSET
    memset_us: Num | None | UnsetType = UNSET
    multi_stream_comm_us: Num | None | UnsetType = UNSET


class StreamFigures(_Doc, kw_only=True):
    stream: Int | str
    comm_us: Num | None | UnsetType = UNSET
    hidden_comm_us: Num | None | UnsetType = UNSET
    exposed_comm_us: Num | None | UnsetType = UNSET


class RankSection(_Doc, kw_only=True):
    rank: Rank
    steps: list[StepFigures] | UnsetType = UNSET
    totals: StepFigures
    streams: list[StreamFigures] | UnsetType = UNSET
    wait_us: Num | None | UnsetType = UNSET


class RunSection(_Doc, kw_only=True):
    world_size: Annotated[int, msgspec.Meta(ge=0, le=2**31)] | None | UnsetType = UNSET
    backend: str | None | UnsetType = UNSET
    device_type: str | None | UnsetType = UNSET
    layout: dict[str, Int | bool | str] | UnsetType = UNSET
    workload: str | None | UnsetType = UNSET
    ranks: list[Rank] | UnsetType = UNSET
    sources: list[str] | UnsetType = UNSET
    manifest: dict[str, Any] | UnsetType = UNSET


class DimensionRow(_Doc, kw_only=True):
    dimension: str
    op: str
    count: Int | UnsetType = UNSET
    bytes: Int | UnsetType = UNSET
    comm_us: Num | None | UnsetType = UNSET
    hidden_comm_us: Num | None | UnsetType = UNSET
    exposed_comm_us: Num | None | UnsetType = UNSET
    wait_us: Num | None | UnsetType = UNSET
    transfer_us: Num | None | UnsetType = UNSET
    busbw_gbps: Num | None | UnsetType = UNSET


class GroupRow(_Doc, kw_only=True):
    pg_name: str
    pg_desc: str | UnsetType = UNSET
    dimension: str | UnsetType = UNSET
    ranks: list[Rank] | UnsetType = UNSET
    count: Int | UnsetType = UNSET
    bytes: Int | UnsetType = UNSET
    comm_us: Num | None | UnsetType = UNSET
    hidden_comm_us: Num | None | UnsetType = UNSET
    exposed_comm_us: Num | None | UnsetType = UNSET
    wait_us: Num | None | UnsetType = UNSET
    transfer_us: Num | None | UnsetType = UNSET


class CollectiveRow(_Doc, kw_only=True):
    rank: Rank
    step: Int | None | UnsetType = UNSET
    op: str | UnsetType = UNSET
    pg_name: str | UnsetType = UNSET
    pg_desc: str | UnsetType = UNSET
    dimension: str | UnsetType = UNSET
    seq: Int | None | UnsetType = UNSET
    stream: Int | str | None | UnsetType = UNSET
    name: str | UnsetType = UNSET
    start_us: Num | None | UnsetType = UNSET
    dur_us: Num | None | UnsetType = UNSET
    bytes: Int | UnsetType = UNSET
    hidden_us: Num | None | UnsetType = UNSET
    exposed_us: Num | None | UnsetType = UNSET
    wait_us: Num | None | UnsetType = UNSET
    transfer_us: Num | None | UnsetType = UNSET
    skew_us: Num | None | UnsetType = UNSET
    algbw_gbps: Num | None | UnsetType = UNSET
    busbw_gbps: Num | None | UnsetType = UNSET


class ClockOffset(_Doc, kw_only=True):
    rank: Rank
    offset_us: Num | None | UnsetType = UNSET
    spread_us: Num | None | UnsetType = UNSET
    matched: Int | UnsetType = UNSET
    method: str | UnsetType = UNSET


class Straggler(_Doc, kw_only=True):
    rank: Rank
    last_arrivals: Int | UnsetType = UNSET
    instances: Int | UnsetType = UNSET
    mean_lateness_us: Num | None | UnsetType = UNSET
    total_caused_wait_us: Num | None | UnsetType = UNSET


class UnrecognisedKernel(_Doc, kw_only=True):
    name: str
    count: Int | UnsetType = UNSET
    total_us: Num | None | UnsetType = UNSET
    streams: list[Int | str] | UnsetType = UNSET


class SummaryDoc(_Doc, kw_only=True):
    """The whole ``tracekit.summary/1`` document."""

    schema: str
    tracekit_version: str | UnsetType = UNSET
    run: RunSection | UnsetType = UNSET
    ranks: list[RankSection]
    by_dimension: list[DimensionRow] | UnsetType = UNSET
    by_process_group: list[GroupRow] | UnsetType = UNSET
    collectives: list[CollectiveRow] | UnsetType = UNSET
    clock_offsets: list[ClockOffset] | UnsetType = UNSET
    stragglers: list[Straggler] | UnsetType = UNSET
    unrecognised_kernels: list[UnrecognisedKernel] | UnsetType = UNSET
    warnings: list[str] | UnsetType = UNSET
    activation_memory: dict[str, Any] | None | UnsetType = UNSET
    timeline: dict[str, Any] | None | UnsetType = UNSET


def decode_summary(data: bytes, source: str = "<summary>") -> SummaryDoc:
    doc = core.decode(data, SummaryDoc, source=source, error=SummaryFormatError, fix=FIX, schema=(FAMILY, MAJOR))
    return _checked(doc, source)


def read_summary(path: str | os.PathLike, max_bytes: int = core.DEFAULT_MAX_DOCUMENT_BYTES,
                 error: type[TracekitError] = SummaryFormatError) -> SummaryDoc:
    """The summary in the file at ``path``; ``error`` is the class of every fault (``report --summary`` takes
    the file as an option: ConfigError)."""
    doc = core.read(path, SummaryDoc, error=error, fix=FIX, max_bytes=max_bytes, schema=(FAMILY, MAJOR))
    return _checked(doc, os.fspath(path), error)


def _checked(doc: SummaryDoc, source: str, error: type[TracekitError] = SummaryFormatError) -> SummaryDoc:
    if not core.schema_accepted(doc.schema, FAMILY, MAJOR):
        raise error(f"{source}: schema is {doc.schema!r}, expected {SCHEMA!r}; {FIX}")
    seen: set[int] = set()
    for r in doc.ranks:
        if r.rank in seen:
            raise error(f"{source}: rank {r.rank} appears twice in `ranks`; {FIX}")
        seen.add(r.rank)
    return doc


def as_dict(doc: SummaryDoc) -> dict[str, Any]:
    """The validated document as the dict the gate and the reports read."""
    return core.to_builtins(doc)
