"""The Nsight Systems export schema as data: the tables tracekit reads, what a missing one costs, the CUPTI enum
values the activity tables carry, and the export's generation (version, schema, metadata table).

Table and column names follow NVIDIA's "SQLite Export Schema Reference" and the schemas of real exports of three
generations (2022.2 / schema 2.9.1, 2024.5 / 3.13.2, 2026.1 / 3.24.14, in tests/data/nsys). Tables are created
lazily by ``nsys export``: a table that is absent held no rows when the report was exported.
"""

from __future__ import annotations

from .database import Export

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"
THREADS = "ThreadNames"
PROCESSES = "PROCESSES"
GPUS = "TARGET_INFO_GPU"
SESSION = "TARGET_INFO_SESSION_START_TIME"
CAPTURE = "META_DATA_CAPTURE"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # the newer name first; 2022.x wrote the second
PAYLOAD_SCHEMAS = "NVTX_PAYLOAD_SCHEMAS"
PAYLOAD_ENTRIES = "NVTX_PAYLOAD_SCHEMA_ENTRIES"
PAYLOAD_ENUMS = "NVTX_PAYLOAD_ENUM_ENTRIES"

# A missing table, and what the analysis cannot do without it (a warning; the load goes on).
COSTS: dict[str, str] = {
    KERNEL: "no kernels: no compute or communication figures (was CUDA traced? nsys profile -t cuda)",
    RUNTIME: "no CUDA runtime calls: no launch edges (device work is placed in steps by time, the critical path has no "
    "launch or sync edges, launch statistics are empty)",
    NVTX: "no NVTX ranges: no steps (one window over the capture) and no NCCL ranges or payloads (collectives get their "
    "op from kernel names and are matched by order; nsys profile -t cuda,nvtx records them)",
    STRINGS: "no string table: no names for kernels, calls and ranges, so no communication kernel can be recognised",
}
# The tables whose presence says a database is an Nsight Systems export.
MARKERS = (KERNEL, RUNTIME, NVTX, STRINGS, *META_TABLES)

# CUPTI enums (cupti_activity.h), the numbers the activity tables store; names as Kineto writes them.
MEMCPY_KINDS = ("Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP")
MEMORY_KINDS = ("Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static")
SYNC_TYPES = ("Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync")
INVALID_STREAM = 0xFFFFFFFF  # CUPTI_SYNCHRONIZATION_INVALID_VALUE: a sync on no one stream (context, event)
# Runtime-table event classes (ENUM_NSYS_EVENT_CLASS): the API call itself; the backtrace rows 2022.x wrote
# beside every call (same correlation id, the call's name without its _vNNNN suffix) are dropped.
RUNTIME_CLASS, DRIVER_CLASS = 0, 1
BACKTRACE_CLASSES = (67, 68, 69)
# NVTX event types (ENUM_NSYS_EVENT_TYPE): ranges with a start and an end
NVTX_RANGE_TYPES = (59, 60, 70, 71)  # NvtxPushPopRange, NvtxStartEndRange, NvtxtPushPopRange, NvtxtStartEndRange
NVTX_DOMAIN_CREATE = 75


def metadata(db: Export) -> tuple[dict[str, str], str]:
    """(name -> value of the export's metadata table, the table's name or "absent")."""
    for table in META_TABLES:
        if db.has(table) and {"name", "value"} <= db.columns(table):
            rows = db.pairs(f"SELECT COALESCE(CAST(name AS TEXT), ''), COALESCE(CAST(value AS TEXT), '') FROM \"{table}\"")
            return dict(rows[:10000]), table
    return {}, "absent"


def generation(db: Export) -> dict[str, str]:
    """The export's generation, for RankInfo.generation and `tracekit info`."""
    meta, table = metadata(db)
    return {
        "format": "nsys-sqlite",
        "nsys_version": meta.get("EXPORT_PRODUCT_VERSION", "unknown")[:40],
        "schema": meta.get("EXPORT_SCHEMA_VERSION", "unknown")[:40],
        "metadata_table": table,
        "nvtx": "present" if db.has(NVTX) else "absent",
        "nvtx_payloads": "schemas" if db.has(PAYLOAD_SCHEMAS) else "none",
        "runtime_name_column": "present" if "name" in db.columns(RUNTIME) else "absent",
    }


def missing_costs(db: Export, path: str) -> list[str]:
    """A warning per table the analysis needs that the export lacks."""
    return [f"{path}: no {table} table: {cost}" for table, cost in COSTS.items() if not db.has(table)]


def is_export(db: Export) -> bool:
    return any(db.has(t) for t in MARKERS) or any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in db.tables)
