"""TraceSet: rank -> EventTable, with the metadata of each rank and of the run."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from .activation import ActivationFiles
from .dropped import DroppedEvents
from .events import EventTable
from .layout import ParallelLayout


@dataclass(frozen=True, slots=True)
class ProcessGroup:
    """One process group as ``distributedInfo.pg_config`` (or a tracekit manifest) describes it."""

    name: str  # pg_name, or the old ``uid`` as text
    desc: str = ""  # pg_desc: "default_pg", "TENSOR_MODEL_PARALLEL_GROUP", "mesh_tp", "tracekit:tp", ...
    ranks: tuple[int, ...] = ()
    size: int = 0
    backend: str = ""
    dimension: str = ""  # filled when the manifest or a rule names it; "" = not yet attributed

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "desc": self.desc,
            "ranks": list(self.ranks),
            "size": self.size,
            "backend": self.backend,
            "dimension": self.dimension,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> ProcessGroup:
        return cls(
            str(d.get("name", "")),
            str(d.get("desc", "")),
            tuple(int(r) for r in d.get("ranks", ())),
            int(d.get("size", 0) or 0),
            str(d.get("backend", "")),
            str(d.get("dimension", "")),
        )


def parse_ranks(text: object) -> tuple[int, ...]:
    """Member ranks written as text, the one parser for every spelling traces use: ``"[0, 1]"``, ``"(0,1)"``,
    ``"0,1"``, ``"0 1"`` -> (0, 1). Only ranks in 0 .. 2**31 - 1 count; a non-string is no ranks."""
    if not isinstance(text, str):
        return ()
    return tuple(int(x) for x in re.findall(r"-?\d+", text) if len(x) <= 10 and 0 <= int(x) < 2**31)


@dataclass(frozen=True, slots=True)
class RankInfo:
    """What one trace file says about its rank and its format."""

    rank: int
    world_size: int
    backend: str = ""
    source: str = ""  # the file it came from
    process_groups: tuple[ProcessGroup, ...] = ()
    device_type: str = "cpu"  # "cuda", "rocm", "mtia" or "cpu" (no device activity at all)
    device_properties: tuple[Mapping, ...] = ()
    base_time_ns: int = 0
    trace_id: str = ""
    nccl_version: str = ""
    host_name: str = ""
    generation: Mapping[str, str] = field(default_factory=dict)  # which format variant was detected
    warnings: tuple[str, ...] = ()
    truncated: bool = False  # the file was cut short and salvaged: events past the cut are lost
    last_complete_ns: int = -1  # when truncated: the time of the last event kept (the loader's time base)
    activities_whole: bool = False  # when truncated: the cut fell in the metadata written after every activity
    dropped: DroppedEvents = field(default_factory=DroppedEvents)  # the events the loader dropped, and where they lay
    # a process group's member ranks as the events' ``pg_ranks`` text names them ("[0, 1]", "0,1") -> the ranks;
    # filled once by the loader (not part of the cache: derived from the table on every load)
    group_ranks: Mapping[str, tuple[int, ...]] = field(default_factory=dict, compare=False)

    def members(self, ranks_text: str) -> tuple[int, ...]:
        """The member ranks the text names: the loader's parse; tables built by hand are parsed here."""
        found = self.group_ranks.get(ranks_text)
        return found if found is not None else parse_ranks(ranks_text)

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "backend": self.backend,
            "source": self.source,
            "process_groups": [pg.to_dict() for pg in self.process_groups],
            "device_type": self.device_type,
            "device_properties": [dict(p) for p in self.device_properties],
            "base_time_ns": self.base_time_ns,
            "trace_id": self.trace_id,
            "nccl_version": self.nccl_version,
            "host_name": self.host_name,
            "generation": dict(self.generation),
            "warnings": list(self.warnings),
            "truncated": self.truncated,
            "last_complete_ns": self.last_complete_ns,
            "activities_whole": self.activities_whole,
            "dropped": self.dropped.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> RankInfo:
        return cls(
            rank=int(d["rank"]),
            world_size=int(d["world_size"]),
            backend=d.get("backend", ""),
            source=d.get("source", ""),
            process_groups=tuple(ProcessGroup.from_dict(p) for p in d.get("process_groups", ())),
            device_type=d.get("device_type", "cpu"),
            device_properties=tuple(d.get("device_properties", ())),
            base_time_ns=int(d.get("base_time_ns", 0)),
            trace_id=d.get("trace_id", ""),
            nccl_version=d.get("nccl_version", ""),
            host_name=d.get("host_name", ""),
            generation=dict(d.get("generation", {})),
            warnings=tuple(d.get("warnings", ())),
            truncated=bool(d.get("truncated", False)),
            last_complete_ns=int(d.get("last_complete_ns", -1)),
            activities_whole=bool(d.get("activities_whole", False)),
            dropped=DroppedEvents.from_dict(d.get("dropped")),
        )


@dataclass(frozen=True, slots=True)
class RunMetadata:
    """The run as a whole: world size, the parallel layout and anything the tracekit manifest adds."""

    world_size: int
    backend: str = ""
    layout: ParallelLayout = field(default_factory=ParallelLayout.unknown)  # run.json's; empty when not recorded
    group_dimensions: Mapping[str, str] = field(default_factory=dict)  # pg name or desc -> dimension
    manifest: Mapping = field(default_factory=dict)  # run.json as written by the collectors, if present
    warnings: tuple[str, ...] = ()
    activation: ActivationFiles = field(default_factory=ActivationFiles)  # activation_r*.json beside the traces

    def __post_init__(self) -> None:
        if not isinstance(self.layout, ParallelLayout):  # a plain mapping such as {"tp": 2, "dp": 2}
            object.__setattr__(self, "layout", ParallelLayout.from_dict(self.layout, where="RunMetadata.layout"))

    def __repr__(self) -> str:
        """The run in one line: world size, backend, layout; the manifest stays out (``.manifest`` has it)."""
        lay = ", ".join(f"{k}={v}" for k, v in self.layout.to_dict().items()) or "unknown"
        groups = len(self.group_dimensions)
        return f"RunMetadata(world_size={self.world_size}, backend={self.backend!r}, layout: {lay}, {groups} groups)"

    def to_dict(self) -> dict:
        return {
            "world_size": self.world_size,
            "backend": self.backend,
            "layout": self.layout.to_dict(),
            "group_dimensions": dict(self.group_dimensions),
            "manifest": dict(self.manifest),
            "warnings": list(self.warnings),
            "activation_files": list(self.activation.found),
        }


@dataclass(frozen=True, slots=True)
class TraceSet:
    """rank -> EventTable plus metadata. Operations return new TraceSets."""

    tables: Mapping[int, EventTable]
    ranks_info: Mapping[int, RankInfo]
    metadata: RunMetadata

    @property
    def ranks(self) -> list[int]:
        return sorted(self.tables)

    # -- notebooks: counts, never the columns -------------------------------------------------------------------
    def _loaded(self) -> str:
        from .display import ids

        world = self.metadata.world_size
        n = len(self.tables)
        who = f"rank{'s' if n != 1 else ''} {ids(self.ranks)}"
        return f"{n} {who}" + (f" of {world}" if world and world != n else "")

    def __repr__(self) -> str:
        """``TraceSet(8 ranks 0–7, 1,234,567 events, 3 steps, gloo/cpu, layout tp=2, cp=2)``."""
        from .display import grouped

        events = sum(len(t) for t in self.tables.values())
        steps = sorted({t._steps() for t in self.tables.values()})
        step_text = ("–".join(map(str, dict.fromkeys([steps[0], steps[-1]]))) if steps else "0") + " steps"
        infos = list(self.ranks_info.values())
        devices = "/".join(sorted({i.device_type for i in infos})) or "?"
        lay = ", ".join(f"{k}={v}" for k, v in self.metadata.layout.to_dict().items() if k != "world_size")
        truncated = sum(1 for i in infos if i.truncated)
        cut = f", {truncated} truncated" if truncated else ""
        return (
            f"TraceSet({self._loaded()}, {grouped(events)} events, {step_text}, {self.metadata.backend or '?'}/{devices}"
            f"{', layout ' + lay if lay else ''}{cut})"
        )

    def _repr_html_(self) -> str:
        import os

        from .display import grouped, html_table

        rows = []
        for r in self.ranks:
            t, i = self.tables[r], self.ranks_info[r]
            rows.append((r, grouped(len(t)), t._steps(), i.device_type, "yes" if i.truncated else "", os.path.basename(i.source)))
        headers = ("rank", "events", "steps", "device", "truncated", "source")
        return html_table(f"TraceSet: {self._loaded()} (.table(rank).to_pandas() for the events)", headers, rows)

    def __iter__(self) -> Iterator[tuple[int, EventTable]]:
        for r in self.ranks:
            yield r, self.tables[r]

    def __len__(self) -> int:
        return len(self.tables)

    def table(self, rank: int) -> EventTable:
        return self.tables[rank]

    def info(self, rank: int) -> RankInfo:
        return self.ranks_info[rank]

    def with_tables(self, tables: Mapping[int, EventTable]) -> TraceSet:
        return replace(self, tables=dict(tables))

    def subset(self, ranks) -> TraceSet:
        keep = [r for r in self.ranks if r in set(ranks)]
        return TraceSet({r: self.tables[r] for r in keep}, {r: self.ranks_info[r] for r in keep}, self.metadata)
