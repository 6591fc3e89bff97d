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
from .contract import SUMMARY_SCHEMA

SCHEMA = SUMMARY_SCHEMA
FAMILY, MAJOR = core.family_major(SCHEMA)
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
    """Base of every section. What the analyzer always writes is required and never null; the rest takes its
    default when absent (numbers null, names "", lists and maps empty; the run's identity fields null = "not
    recorded"), so every reader sees every key. The optional sections (``activation_memory``, ``timeline``)
    stay absent."""


class Totals(_Doc, kw_only=True):
    """A rank's figures summed over its steps (``ranks[].totals``). What the analyzer always writes is required
    and never null; ``overlap_ratio`` is null where there is no communication to overlap."""

    wall_us: Num
    compute_us: Num
    comm_us: Num
    hidden_comm_us: Num
    exposed_comm_us: Num
    overlap_ratio: Num | None = None
    idle_us: Num | None = None
    memcpy_us: Num | None = None
    memset_us: Num | None = None
    multi_stream_comm_us: Num | None = None
    host_wall_us: Num | None = None
    orphan_device_events: Int | None = None
    dropped_events: Int | None = None
    steps_left_out: Int | None = None


class StepFigures(_Doc, kw_only=True):
    """One step's figures (``ranks[].steps[]``): the fields of Totals after ``step``, in the analyzer's order."""

    step: Int
    wall_us: Num
    compute_us: Num
    comm_us: Num
    hidden_comm_us: Num
    exposed_comm_us: Num
    overlap_ratio: Num | None = None
    idle_us: Num | None = None
    memcpy_us: Num | None = None
    memset_us: Num | None = None
    multi_stream_comm_us: Num | None = None
    host_wall_us: Num | None = None
    orphan_device_events: Int | None = None
    dropped_events: Int | None = None  # events lost from the step (dropped as unreadable or implausible)
    complete: bool = True
    partial_reason: str | None | UnsetType = UNSET  # only on incomplete steps


class StreamFigures(_Doc, kw_only=True):
    stream: Int | str
    comm_us: Num
    hidden_comm_us: Num
    exposed_comm_us: Num


Bytes = Annotated[int, msgspec.Meta(ge=-(2**62), le=2**62)]


class MemoryDevice(_Doc, kw_only=True):
    """One device of ``ranks[].memory_timeline`` (docs/breakdowns.md, "Memory timeline")."""

    device: str
    events: Int
    peak_allocated_bytes: Bytes
    peak_reserved_bytes: Bytes = 0
    max_reserved_bytes: Bytes = 0
    peak_us: Num
    peak_step: Int = -1
    start_allocated_bytes: Bytes = 0
    allocated_bytes: Bytes = 0
    freed_bytes: Bytes = 0
    mismatched_totals: Int = 0
    unattributed_bytes: Bytes = 0


class MemoryStepPeak(_Doc, kw_only=True):
    step: Int
    device: str
    peak_allocated_bytes: Bytes
    peak_reserved_bytes: Bytes = 0
    max_reserved_bytes: Bytes = 0
    peak_us: Num
    events: Int = 0


class MemoryPoints(_Doc, kw_only=True):
    device: str
    t_us: list[Num] = []
    allocated_bytes: list[Bytes] = []
    reserved_bytes: list[Bytes] = []


class MemoryAllocator(_Doc, kw_only=True):
    device: str
    op: str
    top_level_op: str = ""
    live_bytes: Bytes
    allocations: Int = 0
    share: Num | None = None


class MemoryTimeline(_Doc, kw_only=True):
    """``ranks[].memory_timeline``: ``{"available": false, "reason": ...}`` without [memory] events."""

    available: bool
    reason: str | UnsetType = UNSET  # only when not available; the rest only when available
    devices: list[MemoryDevice] | UnsetType = UNSET
    steps: list[MemoryStepPeak] | UnsetType = UNSET
    points: list[MemoryPoints] | UnsetType = UNSET
    points_total: Int | UnsetType = UNSET
    max_points: Int | UnsetType = UNSET
    downsampled: bool | UnsetType = UNSET
    top_allocators: list[MemoryAllocator] | UnsetType = UNSET
    notes: list[str] | UnsetType = UNSET


class RankSection(_Doc, kw_only=True):
    rank: Rank
    steps: list[StepFigures] = []
    totals: Totals
    streams: list[StreamFigures] = []
    wait_us: Num | None = None
    truncated: bool | None = None
    # the single-rank breakdowns (docs/breakdowns.md): a table or {"available": false, "reason": ...}
    kernel_breakdown: list[dict[str, Any]] | dict[str, Any] | UnsetType = UNSET
    kernel_classes: list[dict[str, Any]] | dict[str, Any] | UnsetType = UNSET
    busy_partition: dict[str, Any] | UnsetType = UNSET
    idle_breakdown: dict[str, Any] | UnsetType = UNSET
    launch_stats: dict[str, Any] | UnsetType = UNSET
    memory_timeline: MemoryTimeline | UnsetType = UNSET  # from profile_memory=True traces


class RunSection(_Doc, kw_only=True):
    world_size: Annotated[int, msgspec.Meta(ge=0, le=2**31)] | None = None
    backend: str | None = None
    device_type: str | None = None
    layout: dict[str, Int | bool | str] = {}
    workload: str | None = None
    ranks: list[Rank] = []
    sources: list[str] = []
    manifest: dict[str, Any] = {}


class DimensionRow(_Doc, kw_only=True):
    dimension: str
    op: str
    count: Int
    bytes: Int | None = 0  # null: the size is unknown (no element count, or a dtype of unknown size)
    comm_us: Num
    hidden_comm_us: Num
    exposed_comm_us: Num
    wait_us: Num | None = None
    transfer_us: Num | None = None
    busbw_gbps: Num | None = None


class GroupRow(_Doc, kw_only=True):
    pg_name: str
    pg_desc: str = ""
    dimension: str = ""
    ranks: list[Rank] = []
    count: Int
    bytes: Int | None = 0  # null: the size is unknown (no element count, or a dtype of unknown size)
    comm_us: Num
    hidden_comm_us: Num
    exposed_comm_us: Num
    wait_us: Num | None = None
    transfer_us: Num | None = None


class CollectiveRow(_Doc, kw_only=True):
    rank: Rank
    step: Int
    op: str = ""
    pg_name: str = ""
    pg_desc: str = ""
    dimension: str = ""
    seq: Int | None = None
    stream: Int | str | None = None
    name: str = ""
    short_name: str = ""  # analyzers.names.short_name(name): what tables show; name stays whole
    start_us: Num
    dur_us: Num
    bytes: Int | None = 0  # null: the size is unknown (no element count, or a dtype of unknown size)
    hidden_us: Num
    exposed_us: Num
    wait_us: Num | None = None
    transfer_us: Num | None = None
    skew_us: Num | None = None
    algbw_gbps: Num | None = None
    busbw_gbps: Num | None = None


class CollectivesLimit(_Doc, kw_only=True):
    limit: Int
    total: Int
    omitted: Int = 0


class RankDetail(_Doc, kw_only=True):
    """With more ranks than ``full_detail_ranks``: the rows each rank's detail sections keep, and those left out
    (tracekit/analyzers/rank_detail.py)."""

    ranks: Int
    full_detail_ranks: Int
    kernels_per_rank: Int | None = None
    outliers_per_rank: Int | None = None
    memory_points_per_device: Int | None = None
    kernel_rows_omitted: Int = 0
    outlier_rows_omitted: Int = 0


class ClockOffset(_Doc, kw_only=True):
    rank: Rank
    offset_us: Num  # as applied: 0 where the estimate is inside its own error bound
    spread_us: Num
    matched: Int = 0
    method: str = ""
    applied: bool = True  # False: |estimate| <= spread, the clocks agree within ±spread
    estimate_us: Num | None = None


class Straggler(_Doc, kw_only=True):
    rank: Rank
    last_arrivals: Int
    instances: Int
    mean_lateness_us: Num
    total_caused_wait_us: Num


class UnrecognisedKernel(_Doc, kw_only=True):
    name: str
    short_name: str = ""
    count: Int
    total_us: Num
    streams: list[Int | str] = []


class PathSegment(_Doc, kw_only=True):
    """One stretch of a step's critical path (``critical_path.steps[].segments[]``; docs/whatif.md)."""

    rank: Int
    lane: str = ""
    name: str = ""
    start_us: Num
    dur_us: Num
    kind: str
    dimension: str | UnsetType = UNSET  # only on communication segments
    unexplained: bool | UnsetType = UNSET  # only on residual gaps no recorded dependency accounts for


class CriticalStep(_Doc, kw_only=True):
    step: Int
    length_us: Num
    by_kind: dict[str, Num] = {}
    by_dimension: dict[str, Num] = {}
    by_collective: dict[str, Num] = {}
    bound: str = ""  # device, communication, host or mixed (docs/whatif.md); absent before issue 26
    device_busy_us: Num | None = None
    explained_us: Num | None = None
    unexplained_us: Num | None = None
    host_waits: dict[str, Int] = {}  # inferred host waits for the device in the step, by rule
    complete: bool = True
    verdict: str = ""
    segments: list[PathSegment] = []


class WhatIfAnswer(_Doc, kw_only=True):
    question: str
    specs: list[str] = []
    measured_us: Num
    predicted_us: Num
    saving_share: Num | None = None
    notes: list[str] = []


class WhatIfSection(_Doc, kw_only=True):
    steps: Int
    replay_error: Num | None = None
    answers: list[WhatIfAnswer] = []
    notes: list[str] = []


class CriticalPathSection(_Doc, kw_only=True):
    """``critical_path`` (``--critical-path``): the run's verdict, each step's path and the what-if table."""

    verdict: str = ""
    steps: list[CriticalStep] = []
    notes: list[str] = []
    whatif: WhatIfSection | UnsetType = UNSET


class ActivationLayerRow(_Doc, kw_only=True):
    """One (rank, layer) of ``activation_memory.layers``: measured saved bytes against the model's."""

    rank: Rank | None = None
    layer: Int
    measured_bytes: Bytes
    model_bytes: Bytes
    model: str = ""
    delta_bytes: Bytes | None = None  # measured - model


class ActivationMemorySection(_Doc, kw_only=True):
    """``activation_memory`` (a run directory with ``activation_r{rank}.json``; docs/activation-memory.md): the
    rows the reports show are typed, the model's own description (name, formula, config, terms) is free-form."""

    layers: list[ActivationLayerRow] = []
    model: dict[str, Any] = {}
    notes: list[str] = []


class SummaryDoc(_Doc, kw_only=True):
    """The whole ``tracekit.summary/1`` document."""

    schema: str
    tracekit_version: str = ""
    run: RunSection = msgspec.field(default_factory=RunSection)
    ranks: list[RankSection]
    by_dimension: list[DimensionRow] = []
    by_process_group: list[GroupRow] = []
    collectives: list[CollectiveRow] = []
    collectives_limit: CollectivesLimit | None = None  # absent in summaries before the limit
    rank_detail: RankDetail | UnsetType = UNSET  # only when each rank's detail was cut (many ranks)
    clock_offsets: list[ClockOffset] = []
    stragglers: list[Straggler] = []
    unrecognised_kernels: list[UnrecognisedKernel] = []
    warnings: list[str] = []
    activation_memory: ActivationMemorySection | None | UnsetType = UNSET
    critical_path: CriticalPathSection | UnsetType = UNSET  # with `--critical-path` (docs/whatif.md)
    timeline: dict[str, Any] | None | UnsetType = UNSET


def decode_summary(data: bytes, source: str = "<summary>") -> SummaryDoc:
    doc = core.decode(data, SummaryDoc, source=source, error=SummaryFormatError, fix=FIX, schema=(FAMILY, MAJOR))
    return _checked(doc, source)


def summary_from_builtins(data: Any, source: str = "<summary>", error: type[TracekitError] = SummaryFormatError) -> SummaryDoc:
    """A summary held as dicts (``Analysis.to_dict()``, a hand-built one) as the Struct a saved summary gives: it
    goes through the one encoder and decoder, so NaN is null and a fresh analysis, a file and a test's dict are
    validated alike and read the same."""
    try:
        data = core.encode(data)
    except (TypeError, msgspec.EncodeError) as exc:
        raise error(f"{source}: not a summary document ({core.one_line(exc)}); {FIX}") from None
    doc = core.decode(data, SummaryDoc, source=source, error=error, fix=FIX, schema=(FAMILY, MAJOR))
    return _checked(doc, source, error)


def read_summary(
    path: str | os.PathLike, max_bytes: int = core.DEFAULT_MAX_DOCUMENT_BYTES, error: type[TracekitError] = SummaryFormatError
) -> SummaryDoc:
    """The summary in the file at ``path``; ``error`` is the class of every fault (``report --summary`` takes
    the file as an option: ConfigError). Typed only: no second copy of the document as builtins (a baseline of
    10**6 steps is hundreds of MB of them)."""
    data = core.read_bytes(path, error=error, max_bytes=max_bytes)
    try:  # straight into the Structs; a fault is decoded again the general way, for its one-line message
        doc = _TYPED.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        doc = core.decode(data, SummaryDoc, source=os.fspath(path), error=error, fix=FIX, schema=(FAMILY, MAJOR))
    del data
    return _checked(doc, os.fspath(path), error)


_TYPED = msgspec.json.Decoder(SummaryDoc)


def read_summary_as_written(
    path: str | os.PathLike, max_bytes: int = core.DEFAULT_MAX_DOCUMENT_BYTES, error: type[TracekitError] = SummaryFormatError
) -> tuple[SummaryDoc, dict[str, Any]]:
    """The validated summary, and the same document as the file has it (absent keys absent): what
    ``tracekit baseline`` writes back unchanged and the gate reads."""
    data = core.read_bytes(path, error=error, max_bytes=max_bytes)
    doc, raw = core.decode_with_raw(data, SummaryDoc, source=os.fspath(path), error=error, fix=FIX, schema=(FAMILY, MAJOR))
    return _checked(doc, os.fspath(path), error), raw


def _checked(doc: SummaryDoc, source: str, error: type[TracekitError] = SummaryFormatError) -> SummaryDoc:
    if not core.schema_accepted(doc.schema, FAMILY, MAJOR):
        raise error(f"{source}: schema is {doc.schema!r}, expected {SCHEMA!r}; {FIX}")
    seen: set[int] = set()
    for r in doc.ranks:
        if r.rank in seen:
            raise error(f"{source}: rank {r.rank} appears twice in `ranks`; {FIX}")
        seen.add(r.rank)
    return doc


COLLECTIVES_TABLE_SCHEMA = "tracekit.collectives/1"


def write_collectives_table(frame: Any, path: str | os.PathLike | Any) -> int:
    """Every collective instance (``analyzers.summary_schema.collectives_frame``: the columns of
    ``CollectiveRow``) as Parquet at ``path``, the schema name in the file's metadata; returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"schema": COLLECTIVES_TABLE_SCHEMA.encode()})
    pq.write_table(table, path if hasattr(path, "write") else os.fspath(path))  # a path, or a file open for writing
    return table.num_rows


def as_dict(doc: SummaryDoc) -> dict[str, Any]:
    """The validated document as the dict the gate and the reports read."""
    return core.to_builtins(doc)
