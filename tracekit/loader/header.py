"""A trace's header (everything beside ``traceEvents``) decoded field by field.

The header is decoded untyped (it is a few KB), then each field is checked on its own: a field of the wrong type
or an impossible value (a float ``baseTimeNanoseconds``, rank ``"one"``, ``world_size: -3``, a dict where a
process-group rank should be) is dropped with a warning naming it, and the rest of the header is kept. Before,
one such field made the typed decode fail and the whole ``distributedInfo`` was lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..formats import core
from ..formats.core import short_repr as _short
from .structs import DistInfo, PgConfig, Trace

# The version metadata Kineto writes into the header (libkineto's VersionLogger: CUPTI's on CUDA builds,
# roctracer's and HIP's on ROCm builds): the first evidence of the platform that recorded the trace.
VERSION_FIELDS = (
    "roctracer_version",
    "hip_runtime_version",
    "hip_driver_version",
    "cupti_version",
    "cuda_runtime_version",
    "cuda_driver_version",
)
HEADER_FIELDS = (
    "distributedInfo",
    "deviceProperties",
    "baseTimeNanoseconds",
    "trace_id",
    "host_name",
    "schemaVersion",
    "computeProperties",
    *VERSION_FIELDS,
)
_SCALARS = (str, int, float, bool)
_MAX_RANK = 2**31 - 1

Report = Callable[[str, Any, str], None]


def _int(v: Any) -> bool:
    return type(v) is int


MAX_DEPTH = 64  # levels of arrays/objects in one header field; Kineto's go 3 deep


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` nests lists/dicts more than ``limit`` levels."""
    return core.deeper_than(value, limit)


def clean_header(values: Mapping[str, Any], path: str) -> tuple[Trace, list[str]]:
    """``values``: header field -> untyped JSON value (absent fields missing or None). Returns the typed header
    (``traceEvents`` unset) and one warning per dropped field."""
    warnings: list[str] = []

    def bad(name: str, value: Any, why: str) -> None:
        warnings.append(f"{path}: header field {name} = {_short(value)} {why}; dropped it, kept the rest of the header")

    trace = Trace()
    values = dict(values)
    for name in HEADER_FIELDS:
        if deeper_than(values.get(name)):
            bad(name, values.pop(name), f"nests more than {MAX_DEPTH} levels deep")
    base = values.get("baseTimeNanoseconds")
    if base is not None:
        if _int(base):
            trace.baseTimeNanoseconds = base  # the range is checked by checks.check_header (an error)
        else:
            bad("baseTimeNanoseconds", base, "is not an integer number of ns")
    trace.distributedInfo = _dist_info(values.get("distributedInfo"), bad)
    props = "deviceProperties" if values.get("deviceProperties") is not None else "computeProperties"  # 1.8's name
    trace.deviceProperties = _device_properties(values.get(props), bad, props)
    for name in ("trace_id", "host_name", "schemaVersion"):
        v = values.get(name)
        if v is not None and not isinstance(v, _SCALARS):
            bad(name, v, "is not a string or a number")
            v = None
        setattr(trace, name, v)
    versions = {}
    for name in VERSION_FIELDS:
        v = values.get(name)
        if v is None:
            continue
        if isinstance(v, _SCALARS) and not isinstance(v, bool) and len(str(v)) <= 64:
            versions[name] = str(v)
        else:
            bad(name, v, "is not a version (a string or a number)")
    trace.versions = versions or None
    return trace, warnings


def _dist_info(di: Any, bad: Report) -> DistInfo | None:
    if di is None:
        return None
    if not isinstance(di, dict):
        bad("distributedInfo", di, "is not an object")
        return None
    out = DistInfo()
    for name, ok, why in (
        ("backend", _str, "is not a string"),
        ("nccl_version", _str, "is not a string"),
        ("rank", _int, "is not an integer"),
        ("pg_count", _count, "is not a count"),
        ("world_size", _positive, "is not a positive integer"),
    ):
        v = di.get(name)
        if v is None:
            continue
        if ok(v):
            setattr(out, name, v)
        else:
            bad(f"distributedInfo.{name}", v, why)
    pgs = di.get("pg_config")
    if pgs is not None:
        if isinstance(pgs, list):
            out.pg_config = [pg for i, raw in enumerate(pgs) if (pg := _pg_config(raw, i, bad)) is not None]
        else:
            bad("distributedInfo.pg_config", pgs, "is not a list")
    return out


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _count(v: Any) -> bool:
    return _int(v) and 0 <= v <= _MAX_RANK


def _positive(v: Any) -> bool:
    return _int(v) and v >= 1


def _name(v: Any) -> bool:
    return isinstance(v, str) or _int(v)


def _ranks(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(_int(r) and 0 <= r <= _MAX_RANK for r in v))


_PG_FIELDS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("pg_name", _name, "is not a string or an integer"),
    ("uid", _name, "is not a string or an integer"),
    ("pg_desc", _str, "is not a string"),
    ("backend_config", _str, "is not a string"),
    ("pg_size", _count, "is not a count"),
    ("ranks", _ranks, "is not a list of ranks (0 to 2**31) or a string"),
)


def _pg_config(raw: Any, i: int, bad: Report) -> PgConfig | None:
    where = f"distributedInfo.pg_config[{i}]"
    if not isinstance(raw, dict):
        bad(where, raw, "is not an object")
        return None
    pg = PgConfig()
    for name, ok, why in _PG_FIELDS:
        v = raw.get(name)
        if v is None:
            continue
        if ok(v):
            setattr(pg, name, v)
        else:
            bad(f"{where}.{name}", v, why)
    return pg


def _device_properties(props: Any, bad: Report, field: str = "deviceProperties") -> list[dict] | None:
    if props is None:
        return None
    if not isinstance(props, list):
        bad(field, props, "is not a list")
        return None
    kept = [p for p in props if isinstance(p, dict)]
    if len(kept) < len(props):
        bad(field, props, f"holds {len(props) - len(kept)} entries that are not objects")
    return kept
