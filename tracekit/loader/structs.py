"""The typed structs the trace decoders fill: the events and header fields tracekit reads, by name and type.
Shared by decode (whole file), stream (pieces) and header (field-by-field checks)."""

from __future__ import annotations

from typing import Any

import msgspec

Num = int | float
IntOrStr = int | str


# gc=False: decoded events are trees (no cycles); untracked structs allocate and free faster, millions of them
class Args(msgspec.Struct, gc=False):
    # -1 (absent) rather than None when missing: the id columns then convert to numpy in one C call
    external_id: IntOrStr | None = msgspec.field(default=-1, name="External id")
    correlation: IntOrStr | None = -1
    stream: IntOrStr | None = None
    device: IntOrStr | None = -1
    coll_name: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: IntOrStr | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: IntOrStr | None = msgspec.field(default=None, name="Out msg nelems")
    in_size: IntOrStr | None = msgspec.field(default=None, name="In msg size")
    out_size: IntOrStr | None = msgspec.field(default=None, name="Out msg size")
    group_size: IntOrStr | None = msgspec.field(default=None, name="Group size")
    dtype: str | None = None
    in_split: str | list | None = msgspec.field(default=None, name="In split size")
    out_split: str | list | None = msgspec.field(default=None, name="Out split size")
    pg_name: IntOrStr | None = msgspec.field(default=None, name="Process Group Name")
    pg_id: IntOrStr | None = msgspec.field(default=None, name="Process Group ID")
    pg_desc: str | None = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: str | list | None = msgspec.field(default=None, name="Process Group Ranks")
    seq: IntOrStr | None = msgspec.field(default=None, name="Seq")
    src_rank: IntOrStr | None = msgspec.field(default=None, name="Src Rank")
    dst_rank: IntOrStr | None = msgspec.field(default=None, name="Dst Rank")
    name: str | None = None  # thread_name / process_name metadata events
    mem_bytes: IntOrStr | None = msgspec.field(default=None, name="Bytes")
    mem_total: IntOrStr | None = msgspec.field(default=None, name="Total Allocated")
    mem_reserved: IntOrStr | None = msgspec.field(default=None, name="Total Reserved")
    mem_addr: IntOrStr | None = msgspec.field(default=None, name="Addr")
    mem_dev_type: IntOrStr | None = msgspec.field(default=None, name="Device Type")
    mem_dev_id: IntOrStr | None = msgspec.field(default=None, name="Device Id")
    copy_bytes: IntOrStr | None = msgspec.field(default=None, name="bytes")
    # shapes and dtypes of a host op's inputs (record_shapes): a collective's size when its kernel has no args
    input_dims: list | None = msgspec.field(default=None, name="Input Dims")
    input_type: list | None = msgspec.field(default=None, name="Input type")


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: IntOrStr | None = None
    tid: IntOrStr | None = None
    ts: Num | None = None
    dur: Num | None = None
    args: Args | None = None


class PgConfig(msgspec.Struct):
    pg_name: IntOrStr | None = None
    pg_desc: str | None = None
    uid: IntOrStr | None = None
    backend_config: str | None = None
    pg_size: int | None = None
    ranks: list | str | None = None


class DistInfo(msgspec.Struct):
    backend: str | None = None
    rank: int | None = None
    world_size: int | None = None
    pg_count: int | None = None
    pg_config: list[PgConfig] | None = None
    nccl_version: str | None = None


class Trace(msgspec.Struct):
    """A decoded trace: the events and the header fields tracekit reads, each of its expected type."""

    traceEvents: list[Event] | None = None
    distributedInfo: DistInfo | None = None
    deviceProperties: list[dict] | None = None
    baseTimeNanoseconds: int | None = None
    trace_id: Any = None
    host_name: Any = None
    schemaVersion: Any = None
    versions: dict | None = None  # the profiler's library versions (header.VERSION_FIELDS): which platform recorded
    # set by salvage_truncated, never read from a file (no trace has this key)
    truncated: bool = msgspec.field(default=False, name="~tracekit salvaged a truncated file~")
    # set by the lenient decode: (ts as written, correlation or -1, reason) of each event it could not convert or
    # cut out around a corrupt byte
    dropped: list = msgspec.field(default_factory=list, name="~tracekit dropped malformed events~")


class RawTrace(msgspec.Struct):
    """What the decoders read: typed events, an untyped header (a few KB) that ``header.clean_header`` checks
    field by field, so one mistyped field costs that field only."""

    traceEvents: list[Event] | None = None
    distributedInfo: Any = None
    deviceProperties: Any = None
    computeProperties: Any = None  # PyTorch 1.8's name for deviceProperties
    baseTimeNanoseconds: Any = None
    trace_id: Any = None
    host_name: Any = None
    schemaVersion: Any = None
    roctracer_version: Any = None  # Kineto's version metadata (libkineto VersionLogger.cpp): ROCm
    hip_runtime_version: Any = None
    hip_driver_version: Any = None
    cupti_version: Any = None  # ... and CUDA
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
