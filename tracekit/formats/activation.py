"""The activation-memory file ``activation_r{rank}.json`` (schema ``tracekit.activation_memory/1``), written by
``ActivationRecorder.result().save(path)`` beside a rank's trace: per step, the bytes each transformer layer saved
for backward, the bytes saved outside the layers, and the allocator's peak when the profiler recorded memory.

Read through :func:`tracekit.formats.core.read` (size, depth, NaN/Infinity, gzip by magic bytes) into
:class:`ActivationDoc`; the analyzer needs only the per-layer part, so the per-module and per-tensor lists are
read loosely (kept for the writer's round trip, never trusted for a figure).
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from ..errors import TraceFormatError
from ..model.activation import SCHEMA, ActivationMemoryResult, LayerActivation, StepActivation
from . import core

FAMILY, MAJOR = core.family_major(SCHEMA)
MAX_BYTES = 256 * 1024**2  # per-tensor lists of a long run stay far below this
_Bytes = Annotated[int, Meta(ge=0, le=2**62)]
FILE_NAME = re.compile(r"^activation_r(\d+)\.json$")  # the one spelling of the file's name (and file_name below)
_FIX = "re-record it with --activation-memory (ActivationRecorder.result().save) or delete it"


class LayerDoc(msgspec.Struct, kw_only=True):
    layer: Annotated[int, Meta(ge=0, le=2**31)]
    measured_bytes: _Bytes
    name: str = ""


class StepDoc(msgspec.Struct, kw_only=True):
    step: Annotated[int, Meta(ge=0, le=2**31)]
    saved_bytes: _Bytes
    layers: list[LayerDoc]
    outside_layers_bytes: _Bytes = 0
    peak_bytes: _Bytes | None = None
    peak_over_start_bytes: Annotated[int, Meta(ge=-(2**62), le=2**62)] | None = None
    modules: list[Any] = []
    tensors: list[Any] = []


class ActivationDoc(msgspec.Struct, kw_only=True):
    schema: str
    steps: Annotated[list[StepDoc], Meta(min_length=1)]
    rank: Annotated[int, Meta(ge=0, le=2**31 - 1)] | None = None
    peak_source: str = ""


def file_name(rank: int) -> str:
    """``activation_r{rank}.json``: where a rank's result goes, beside its trace."""
    return f"activation_r{rank}.json"


def rank_of(name: str) -> int | None:
    """The rank in an activation file's name, None for any other name."""
    m = FILE_NAME.match(name)
    return int(m.group(1)) if m else None


def read_activation(path: str | os.PathLike) -> ActivationMemoryResult:
    """The per-layer part of a saved result (modules and tensors are not needed by the analyzer). Raises a
    one-line :class:`TraceFormatError` naming the file, the field and the fix."""
    doc = core.read(path, ActivationDoc, error=TraceFormatError, fix=_FIX, max_bytes=MAX_BYTES, schema=(FAMILY, MAJOR))
    if not core.schema_accepted(doc.schema, FAMILY, MAJOR):
        raise TraceFormatError(f"{os.fspath(path)}: schema is {core.short_repr(doc.schema)}, expected {SCHEMA!r}; {_FIX}")
    steps = tuple(
        StepActivation(
            s.step,
            s.saved_bytes,
            s.outside_layers_bytes,
            tuple(LayerActivation(x.layer, x.name, x.measured_bytes) for x in s.layers),
            (),
            (),
            s.peak_bytes,
            s.peak_over_start_bytes,
        )
        for s in doc.steps
    )
    return ActivationMemoryResult(doc.rank, steps, doc.peak_source)
