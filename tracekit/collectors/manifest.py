"""The run manifest ``run.json``: what the traces alone do not say about a run.

Schema ``tracekit.run/1``::

    {"schema": "tracekit.run/1", "world_size": 4, "backend": "gloo",
     "layout": {"tp": 2, "cp": 2, "dp": 1, "sequence_parallel": true, "cp_kind": "ring", "world_size": 4},
     "process_groups": [{"name": "1", "desc": "tracekit:sp", "ranks": [0, 1], "size": 2, "dimension": "sp"}, ...],
     "group_dimensions": {"1": "sp", "tracekit:sp": "sp", ...},
     "model": {"layers": 2, "seq": 32, ...}, "versions": {"torch": ..., "nccl": ..., "tracekit": ..., "python": ...},
     "command_line": [...], "start_time": "2025-...Z", "start_time_ns": ..., "profiled_ranks": [0, 1, 2, 3],
     "schedule": {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}, "profiler_overhead": {...}}
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Mapping
from datetime import datetime, timezone

import torch
import torch.distributed as dist

from ..formats.manifest import NAME as MANIFEST_NAME
from ..formats.manifest import SCHEMA, encode, read_manifest
from . import comm

__all__ = ["MANIFEST_NAME", "SCHEMA", "build", "discovered_groups", "read", "versions", "write"]


def versions() -> dict:
    nccl = ""
    try:
        if torch.cuda.is_available():
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        nccl = ""
    from .._version import __version__

    return {"torch": torch.__version__, "nccl": nccl, "tracekit": __version__, "python": platform.python_version()}


def discovered_groups() -> list[dict]:
    """The process groups this rank knows of (those it belongs to), when no layout describes them."""
    if not (dist.is_available() and dist.is_initialized()):
        return []
    out = []
    for pg, members in dict(dist.distributed_c10d._world.pg_group_ranks).items():
        desc = comm.group_desc(pg)
        dim = desc.removeprefix("tracekit:") if desc.startswith("tracekit:") else ""
        ranks = sorted(members)
        out.append({"name": comm.group_name(pg), "desc": desc, "ranks": ranks, "size": len(ranks), "dimension": dim})
    return out


def build(
    *,
    layout=None,
    groups: list[dict] | None = None,
    model: Mapping | None = None,
    profiled_ranks=None,
    schedule: Mapping | None = None,
) -> dict:
    """The manifest of this run. ``layout``: a :class:`~tracekit.model.layout.ParallelLayout` (its manifest
    form is written), a mapping such as ``{"tp": 2, "dp": 2}``, or None; ``groups``: process-group dicts
    (default: those this rank can see)."""
    initialized = dist.is_available() and dist.is_initialized()
    world = dist.get_world_size() if initialized else 1
    if groups is None:
        groups = discovered_groups()
    layout_dict = layout.to_dict() if hasattr(layout, "to_dict") else dict(layout or {})
    group_dims = {}
    for g in groups:
        if g.get("dimension"):
            group_dims[str(g["name"])] = g["dimension"]
            if g.get("desc"):
                group_dims[g["desc"]] = g["dimension"]
    now = time.time_ns()
    return {
        "schema": SCHEMA,
        "world_size": world,
        "backend": dist.get_backend() if initialized else "",
        "layout": layout_dict,
        "process_groups": [dict(g) for g in groups],
        "group_dimensions": group_dims,
        "model": dict(model or {}),
        "versions": versions(),
        "command_line": list(sys.argv),
        "start_time": datetime.fromtimestamp(now / 1e9, timezone.utc).isoformat().replace("+00:00", "Z"),
        "start_time_ns": now,
        "hostname": platform.node(),
        "pid": os.getpid(),
        "profiled_ranks": sorted(profiled_ranks) if profiled_ranks is not None else list(range(world)),
        "schedule": dict(schedule or {}),
    }


def write(path: str | os.PathLike, manifest: Mapping) -> None:
    """Write atomically (a reader never sees half a manifest), through the one encoder: keys sorted, NaN and
    Infinity as null, and a known field of the wrong shape refused here rather than dropped by the reader."""
    data = encode(dict(manifest))
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):  # a full disk leaves no half-written temporary behind
            os.unlink(tmp)
        raise


def read(path: str | os.PathLike) -> dict:
    """The manifest as the loader reads it (fields checked one by one; see :mod:`tracekit.formats.manifest`)."""
    return read_manifest(path)[0]
