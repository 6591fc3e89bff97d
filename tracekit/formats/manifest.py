"""The run manifest ``run.json`` (schema ``tracekit.run/1``): what the traces alone do not say about a run.

The collectors write it (:mod:`tracekit.collectors.manifest`); the loader reads it beside the traces. A manifest
is a few KB, often edited by hand (a layout added to someone else's traces), so it is read the way a trace header
is: the document must be JSON (size, depth, NaN and Infinity checked by :mod:`.core`), then each known field is
checked on its own against :class:`RunManifest`. A field of the wrong type or an impossible value (``world_size:
-3``, ``process_groups`` as a list of strings) is dropped with a warning naming it; the rest is kept. A manifest
of another schema family or major version is ignored with a warning. ``layout`` stays a mapping here: it is
checked by :meth:`~tracekit.model.layout.ParallelLayout.from_dict`, whose faults are warnings of their own.
Unknown fields are kept as they are, for the summary's ``run.manifest``.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..errors import TraceFormatError
from . import core

FAMILY, MAJOR = "tracekit.run", 1
SCHEMA = f"{FAMILY}/{MAJOR}"
NAME = "run.json"
MAX_BYTES = 16 * 1024**2  # a manifest is a few KB: layout, process groups, versions
MAX_DEPTH = 64  # levels of arrays/objects; the collectors write 3

_Rank = Annotated[int, Meta(ge=0, le=2**31 - 1)]
_Size = Annotated[int, Meta(ge=1, le=2**31)]


class ProcessGroup(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One process group as the collectors saw it: its name (the trace's ``Process Group Name``), its
    description, its ranks and the parallel dimension it carries ("" when unknown)."""

    name: str | int
    desc: str = ""
    ranks: list[_Rank] = []
    size: Annotated[int, Meta(ge=0, le=2**31)] = 0
    dimension: str = ""


class RunManifest(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The known fields of ``run.json``; each is UNSET when absent or dropped."""

    schema: str | UnsetType = UNSET
    world_size: _Size | UnsetType = UNSET
    backend: str | UnsetType = UNSET
    layout: Any = UNSET  # checked by ParallelLayout.from_dict, whose faults are warnings of their own
    process_groups: list[ProcessGroup] | UnsetType = UNSET
    group_dimensions: dict[str, str] | UnsetType = UNSET
    model: dict[str, Any] | UnsetType = UNSET
    versions: dict[str, str] | UnsetType = UNSET
    command_line: list[str] | UnsetType = UNSET
    start_time: str | UnsetType = UNSET
    start_time_ns: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    hostname: str | UnsetType = UNSET
    pid: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    profiled_ranks: list[_Rank] | UnsetType = UNSET
    schedule: dict[str, Annotated[int, Meta(ge=0)]] | UnsetType = UNSET
    profiler_overhead: dict[str, Any] | UnsetType = UNSET
    activation_memory: bool | UnsetType = UNSET
    workload: str | UnsetType = UNSET


FIELDS: dict[str, Any] = {f.name: f.type for f in msgspec.structs.fields(RunManifest)}
_FIX = "fix or delete it (tracekit run and tracekit.profile write it)"


def read_manifest(path: str | os.PathLike) -> tuple[dict[str, Any], list[str]]:
    """The manifest at ``path`` as a plain dict of the fields that passed their checks (unknown fields kept), and
    one warning per dropped field. Raises a one-line :class:`TraceFormatError` (exit 3) when the file is not a
    readable JSON object: too large, nested too deeply, not UTF-8, not JSON, NaN or Infinity."""
    source = os.fspath(path)
    raw = core.decode(
        core.read_bytes(path, error=TraceFormatError, max_bytes=MAX_BYTES), Any, source=source, error=TraceFormatError, fix=_FIX
    )
    if core.deeper_than(raw, MAX_DEPTH):
        raise TraceFormatError(f"{source}: unreadable run manifest (nested more than {MAX_DEPTH} levels deep); {_FIX}")
    if not isinstance(raw, dict):
        raise TraceFormatError(f"{source}: the run manifest is a JSON {type(raw).__name__}, not an object; {_FIX}")
    return clean(raw, source)


def clean(raw: dict[str, Any], source: str = NAME) -> tuple[dict[str, Any], list[str]]:
    """``raw`` with each known field checked on its own (see the module docstring)."""
    schema = raw.get("schema")
    if schema is not None and not core.schema_accepted(schema, FAMILY, MAJOR):
        return {}, [f"{source}: schema is {core.short_repr(schema)}, not {SCHEMA}; the run manifest is ignored"]
    kept: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        type_ = FIELDS.get(key)
        if type_ is None or value is None:
            kept[key] = value
            continue
        try:
            msgspec.convert(value, type_)  # checked; kept as written (defaults not filled in, ints not renamed)
            kept[key] = value
        except msgspec.ValidationError as exc:
            warnings.append(
                f"{source}: field {key} = {core.short_repr(value)} is not valid ({core.one_line(exc)}); "
                "dropped it, kept the rest of the manifest"
            )
    return kept, warnings


def encode(manifest: dict[str, Any]) -> bytes:
    """The manifest as JSON bytes, keys sorted, NaN and Infinity written as null; refused (ValueError) when a
    known field would not read back, so a writer cannot produce a manifest its own reader drops."""
    known = {k: v for k, v in manifest.items() if k in FIELDS and v is not None}
    try:
        msgspec.convert(known, RunManifest)
    except msgspec.ValidationError as exc:
        raise ValueError(f"run manifest field would not read back: {core.one_line(exc)}") from None
    return core.dumps(manifest, indent=1, sort_keys=True).encode()
