"""The metadata of a Parquet cache entry (``loader/cache.py``): the source's stamp, the rule key, the string table
and the rank's RankInfo, as typed Structs. A cache file is untrusted input: the loader decodes this metadata
through :data:`CacheMeta` (types, ranges) and then validates the table as a fresh load is; anything off is a
reload with a warning, never a traceback."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ..model.dropped import DroppedEvents
from ..model.traceset import ProcessGroup, RankInfo

MAX_RANK = 2**31 - 1
_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_RANK)]


class CachedGroup(msgspec.Struct, kw_only=True):
    """``ProcessGroup.to_dict()``: member ranks and the size within 0 .. 2**31 - 1."""

    name: str = ""
    desc: str = ""
    ranks: list[_Count] = []
    size: _Count = 0
    backend: str = ""
    dimension: str = ""


class CachedDropped(msgspec.Struct, kw_only=True):
    """``DroppedEvents.to_dict()``: counts per reason, and [reason, start ns, correlation] per placed event."""

    counts: dict[str, _Count] = {}
    events: list[tuple[str, int, int]] = []

    def dropped(self) -> DroppedEvents:
        return DroppedEvents.from_dict({"counts": self.counts, "events": self.events})


class CachedRankInfo(msgspec.Struct, kw_only=True):
    """``RankInfo.to_dict()``. The rank, the world size and the base time are what the cache writes always;
    their ranges (rank below the world size, base time below 2**62) are checked by ``loader.cache.validate``."""

    rank: int
    world_size: int
    base_time_ns: int
    backend: str = ""
    source: str = ""
    process_groups: list[CachedGroup] = []
    device_type: str = "cpu"
    device_properties: list[dict[str, Any]] = []
    trace_id: str = ""
    nccl_version: str = ""
    host_name: str = ""
    generation: dict[str, str] = {}
    warnings: list[str] = []
    truncated: bool = False
    last_complete_ns: int = -1
    activities_whole: bool = False
    dropped: CachedDropped = msgspec.field(default_factory=CachedDropped)

    def rank_info(self) -> RankInfo:
        groups = tuple(ProcessGroup(g.name, g.desc, tuple(g.ranks), g.size, g.backend, g.dimension) for g in self.process_groups)
        return RankInfo(
            rank=self.rank,
            world_size=self.world_size,
            backend=self.backend,
            source=self.source,
            process_groups=groups,
            device_type=self.device_type,
            device_properties=tuple(self.device_properties),
            base_time_ns=self.base_time_ns,
            trace_id=self.trace_id,
            nccl_version=self.nccl_version,
            host_name=self.host_name,
            generation=dict(self.generation),
            warnings=tuple(self.warnings),
            truncated=self.truncated,
            last_complete_ns=self.last_complete_ns,
            activities_whole=self.activities_whole,
            dropped=self.dropped.dropped(),
        )


class CacheMeta(msgspec.Struct, kw_only=True):
    """The whole metadata document (stored under the ``tracekit`` key of the Parquet schema metadata)."""

    stamp: dict[str, int]
    rules: str
    strings: list[str]
    info: CachedRankInfo


def decode_meta(raw: Any) -> CacheMeta:
    """The metadata, already decoded from JSON, as CacheMeta; a wrong shape is a ValueError whose message names
    the field (``Expected `int`, got `str` - at `$.info.rank```): the reason the loader's warning gives."""
    try:
        return msgspec.convert(raw, CacheMeta)
    except msgspec.ValidationError as exc:
        raise ValueError(" ".join(str(exc).split())) from None
