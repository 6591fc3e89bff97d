"""Which parallel dimension a process group serves: rules as data, plus the manifest and user overrides.

Order of precedence: a user override (``--dim-map PATTERN=DIM``, shell-style pattern on the group's
description or name, or on the communication library that ran the kernel: ``--dim-map 'deepep=ep'``); then the
evidence of an expert-parallel library (DeepEP, mori: comm_families.EP_LIBRARIES) whose kernel carries no group
of its own (none, or the world group the loader assumed): ``ep``, said in the warnings; then what the run says
(the tracekit manifest's group→dimension map, or a ``ProcessGroup.dimension`` the loader filled), then the rule
table below on the description, then a group of all ranks is ``world``; anything else is ``unknown``: never a
guess. ``dimension_warnings`` names ``--dim-map`` wherever a dimension came out ``world`` or ``unknown``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError
from ...loader.comm_families import EP_LIBRARIES
from ...model.layout import Dimension

UNKNOWN = Dimension.UNKNOWN.value
TP, CP, DP, PP, EP = (d.value for d in (Dimension.TP, Dimension.CP, Dimension.DP, Dimension.PP, Dimension.EP))


def _both(*dims: str) -> str:
    """A group serving several axes at once: their names joined by "_" (tp_cp, dp_cp, ...)."""
    return "_".join(dims)


# (regular expression on the process group description, dimension). First match wins; \1 copies a group.
# Dimensions are the names of tracekit.model.layout.Dimension; groups that serve two axes at once keep a
# compound name (tp_cp, dp_cp, ...), the default group is "world".
RULES: tuple[tuple[str, str], ...] = (
    # tracekit's own collectors name their groups "tracekit:<dim>"
    (r"^tracekit:(\w+)$", r"\1"),
    # Megatron-LM / Megatron-Core parallel_state (most specific first)
    (r"^TENSOR_AND_CONTEXT_PARALLEL_GROUP", _both(TP, CP)),
    (r"^TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", _both(TP, DP, CP)),
    (r"^TENSOR_AND_DATA_PARALLEL_GROUP", _both(TP, DP)),
    (r"^TENSOR_AND_EXPERT_PARALLEL_GROUP", _both(TP, EP)),
    (r"^TENSOR_MODEL_PARALLEL_GROUP", TP),
    (r"^HIERARCHICAL_CONTEXT_PARALLEL_GROUP", CP),
    (r"^CONTEXT_PARALLEL_GROUP", CP),
    (r"^DATA_PARALLEL_GROUP_WITH_CP", _both(DP, CP)),
    (r"^(INTRA_|INTER_)?(PARTIAL_)?DATA_PARALLEL_GROUP", DP),
    (r"^PIPELINE_MODEL_PARALLEL_GROUP", PP),
    (r"^(POSITION_)?EMBEDDING_GROUP", PP),
    (r"^EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", _both(TP, EP)),
    (r"^EXPERT_TENSOR_PARALLEL_GROUP", "etp"),
    (r"^EXPERT_MODEL_PARALLEL_GROUP", EP),
    (r"^EXPERT_DATA_PARALLEL_GROUP", "edp"),
    (r"^(INTRA_|INTER_)?(PARTIAL_)?EXPERT_DATA_PARALLEL_GROUP", "edp"),
    (r"^MODEL_PARALLEL_GROUP", "mp"),
    # torch DeviceMesh: mesh_<dim name>, e.g. mesh_tp, mesh_dp_shard, mesh_dp_shard_cp
    (r"^mesh_(\w+)$", r"\1"),
    # the default group spans every rank
    (r"^default_pg$", "world"),
)

_COMPILED = tuple((re.compile(p), d) for p, d in RULES)


@dataclass(frozen=True, slots=True)
class DimensionMap:
    """Resolves (pg_name, pg_desc, ranks) to a dimension name."""

    overrides: tuple[tuple[str, str], ...] = ()  # (shell pattern, dimension)
    known: Mapping[str, str] | None = None  # pg name or desc -> dimension (manifest, loader)
    world_size: int = 0

    def dimension(self, pg_name: str, pg_desc: str, ranks: Iterable[int] = (), library: str = "") -> str:
        """``library``: the communication library of the instance's kernel (the loader's name rules), "" if none."""
        pg_name, pg_desc, ranks = pg_name or "", pg_desc or "", tuple(ranks)
        for pattern, dim in self.overrides:
            if library and fnmatch.fnmatchcase(library, pattern):
                return dim
        if library in EP_LIBRARIES and pg_desc in ("", "default_pg") and not ranks:
            return EP  # an EP library's kernel on no group of its own: its library is the evidence
        for pattern, dim in self.overrides:
            if (pg_desc and fnmatch.fnmatchcase(pg_desc, pattern)) or fnmatch.fnmatchcase(pg_name, pattern):
                return dim
        known = self.known or {}
        for key in (pg_desc, pg_name):
            if key and known.get(key):
                return known[key]
        for rx, dim in _COMPILED:
            m = rx.match(pg_desc)
            if m:
                return m.expand(dim)
        if self.world_size > 1 and len(ranks) == self.world_size and set(ranks) == set(range(self.world_size)):
            return "world"
        return UNKNOWN


def parse_overrides(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``PATTERN=DIM`` strings (from ``--dim-map``) as (pattern, dim) pairs."""
    out = []
    for item in items:
        pattern, sep, dim = str(item).rpartition("=")
        if not sep or not pattern or not dim.strip():
            raise ConfigError(f"--dim-map {item!r}: expected PATTERN=DIM, e.g. --dim-map 'mesh_fsdp*=dp'")
        out.append((pattern.strip(), dim.strip()))
    return tuple(out)


def dimension_map(traces, overrides: Iterable[str] | Iterable[tuple[str, str]] = ()) -> DimensionMap:
    """The map for a TraceSet: overrides first, then the manifest and the loader's group dimensions."""
    pairs = tuple(o if isinstance(o, tuple) else parse_overrides([o])[0] for o in overrides)
    known: dict[str, str] = {}
    for r in traces.ranks:
        for pg in traces.info(r).process_groups:
            if pg.dimension:
                known.setdefault(pg.desc or pg.name, pg.dimension)
    known.update(dict(traces.metadata.group_dimensions))
    return DimensionMap(pairs, known, int(traces.metadata.world_size or 0))


def dimension_warnings(inst, libraries: np.ndarray, dims: np.ndarray, overrides: tuple) -> list[str]:
    """What the dimension attribution could not take from the run's metadata: the instances put on ``ep`` by
    their library alone, and the groups whose dimension is ``world`` or ``unknown``, each with the ``--dim-map``
    that names it. ``libraries``/``dims``: per instance, as ``DimensionMap.dimension`` was given and gave them."""
    out = []
    inferred = (dims == EP) & np.isin(libraries, sorted(EP_LIBRARIES)) & ~_overridden(libraries, overrides)
    if inferred.any():
        import pandas as pd  # here: the Flight Recorder's reading of a saved run imports this module without pandas

        ops = pd.Series(inst["op"][inferred]).replace("", "unknown").value_counts()
        libs = sorted(set(libraries[inferred].tolist()))
        dur_ms = float((inst["end_ns"][inferred] - inst["start_ns"][inferred]).sum()) / 1e6
        out.append(
            f"{int(inferred.sum())} collectives of expert-parallel libraries ({', '.join(libs)}: "
            + ", ".join(f"{op} ×{n}" for op, n in ops.items())
            + f"; {dur_ms:.1f} ms) carry no process group of their own: attributed to dimension 'ep' by their "
            f"library; if they serve another dimension, say so with --dim-map '{libs[0]}=DIM'"
        )
    for dim in ("world", UNKNOWN):
        hit = dims == dim
        if not hit.any():
            continue
        groups = sorted({d or n or "(no group)" for d, n in zip(inst["pg_desc"][hit], inst["pg_name"][hit])})
        shown = ", ".join(groups[:4]) + (f" and {len(groups) - 4} more" if len(groups) > 4 else "")
        example = next((g for g in groups if g != "(no group)"), "PATTERN")
        out.append(
            f"{int(hit.sum())} collectives on groups {shown} have dimension '{dim}': "
            + ("the group spans every rank, which names no parallel axis" if dim == "world" else "no rule names it")
            + f"; name it with --dim-map '{example}=DIM' (DIM: tp, cp, dp, pp, ep, ...)"
        )
    return out


def _overridden(libraries: np.ndarray, overrides: tuple) -> np.ndarray:
    return np.array([any(lib and fnmatch.fnmatchcase(lib, p) for p, _ in overrides) for lib in libraries.tolist()], bool)
