"""Loading traces: files, directories and globs -> TraceSet, with a Parquet cache per rank.

Only this package reads the Chrome-trace JSON format. Ranks come from ``distributedInfo``, never from file
names. Ranks load in parallel on a local process pool (or a Dask cluster, see ``tracekit.loader.executors``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import InputLimitError, MissingRankError, TraceFormatError
from ..formats.manifest import NAME as MANIFEST
from ..formats.manifest import read_manifest
from ..model.events import EventTable
from ..model.layout import LayoutError, ParallelLayout
from ..model.traceset import RankInfo, RunMetadata, TraceSet, parse_ranks
from ..runtime.env import check_env
from ..runtime.memory import gc_paused, release_free_memory
from .activation import activation_beside
from .cache import read_cache, source_stamp, write_cache
from .checks import DEFAULT_MAX_STRING_BYTES, check_header, check_rank, check_strings, check_table
from .classify import RuleSet
from .columnar import TableBuilder, build_table
from .decode import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_RATIO,
    StreamLimits,
    Trace,
    decode,
    exact_times_ns,
    needs_exact_times,
    read_bytes,
    too_deep,
)
from .executors import map_files
from .nsys import is_export, load_export
from .nsys.ranks import assign as assign_ranks
from .paths import find_traces
from .split import fill, load_split
from .stream import EventStream, NotStreamable


@dataclass(frozen=True, slots=True)
class LoadOptions:
    rules: RuleSet = field(default_factory=RuleSet)
    cache: bool = True
    cache_dir: str | None = None  # default: formats.cache_location ($TRACEKIT_CACHE_DIR, else ~/.cache/tracekit)
    max_bytes: int = DEFAULT_MAX_BYTES
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES
    max_gzip_ratio: float = DEFAULT_MAX_RATIO
    split: int = 1  # processes for one big plain-JSON file (split at event boundaries, see split.py); 1: serial

    def __post_init__(self) -> None:
        check_env()  # a TRACEKIT_MAX_* variable that is not a positive number


def load_file(path: str, options: LoadOptions | None = None) -> tuple[EventTable, RankInfo]:
    """One trace file -> (EventTable, RankInfo). Raises TraceFormatError naming the file."""
    options = options or LoadOptions()
    notes: list[str] = []
    stamp = None
    if options.cache:
        stamp = source_stamp(path)  # before the read: a trace that grows during the load is not cached as read
        hit = read_cache(path, options, notes)
        if hit is not None:
            check_strings(hit[0], path, options.max_string_bytes)
            return hit[0], with_group_ranks(*hit)
    try:
        try:
            table, info = _load_split(path, options) if options.split > 1 else _load_streaming(path, options)
        except NotStreamable:
            table, info = _load_whole(path, options)
    except OverflowError as exc:  # a number no int64/int32 column can hold: refuse rather than wrap around
        raise TraceFormatError(f"{path}: a number in the trace is out of range ({exc}); the trace is corrupt") from None
    except RecursionError:
        raise TraceFormatError(too_deep(path)) from None
    except MemoryError:
        raise InputLimitError(
            f"{path}: out of memory while loading; lower --max-trace-bytes to refuse such files "
            "early, or load on a machine with more memory"
        ) from None
    release_free_memory()  # what the decoded events and pieces left in the heap, before the analyzers allocate
    table, info = check_table(table, info, path, options.max_string_bytes)
    if options.cache and stamp is not None:
        write_cache(path, options, table, info, stamp)
    info = with_group_ranks(table, info)
    if notes:  # about this load only (a rejected cache entry): not written to the cache
        info = replace(info, warnings=tuple(notes) + tuple(info.warnings))
    return table, info


def _limits(options: LoadOptions) -> StreamLimits:
    return StreamLimits(options.max_bytes, options.max_string_bytes, options.max_gzip_ratio)


def with_group_ranks(table: EventTable, info: RankInfo) -> RankInfo:
    """``info`` with every process group's member ranks parsed once, from the distinct ``pg_ranks`` texts."""
    ids = np.unique(table["pg_ranks_id"])
    texts = [table.strings[i] for i in ids.tolist() if 0 <= i < len(table.strings)]
    return replace(info, group_ranks={t: parse_ranks(t) for t in texts if t})


def _load_streaming(path: str, options: LoadOptions) -> tuple[EventTable, RankInfo]:
    """Decode and columnarise piece by piece: memory holds the columns, not the file or all its structs."""
    stream = EventStream(path, _limits(options))
    builder = fill(TableBuilder(options.rules), stream)
    header = stream.header if stream.header is not None else Trace()
    check_header(header, path)
    with gc_paused():
        return builder.finish(header, path, [*stream.notes, *stream.warnings])


def _load_split(path: str, options: LoadOptions) -> tuple[EventTable, RankInfo]:
    """One big plain-JSON trace decoded in pieces on ``options.split`` processes; else the serial stream."""
    try:
        builder, header, warnings = load_split(path, _limits(options), options.rules, options.split)
    except NotStreamable:
        return _load_streaming(path, options)
    check_header(header, path)
    with gc_paused():
        return builder.finish(header, path, warnings)


def _load_whole(path: str, options: LoadOptions) -> tuple[EventTable, RankInfo]:
    """The whole file at once: lenient decoding, salvage of truncated traces, exact ns timestamps."""
    notes: list[str] = []
    data = read_bytes(path, _limits(options), notes)
    trace, warnings = decode(data, path)
    warnings = notes + warnings
    check_header(trace, path)
    exact = exact_times_ns(data) if needs_exact_times(trace) else None
    del data
    with gc_paused():
        return build_table(trace, path, options.rules, warnings, exact)


def load(paths, *, options: LoadOptions | None = None, executor=None, progress: bool | None = None) -> TraceSet:
    """Load every rank's trace. ``executor``: None (a local process pool when there are several files),
    "serial", a ``concurrent.futures`` executor, or a dask ``Client``/"dask://host:port"."""
    options = options or LoadOptions()
    files = find_traces(paths)
    if any(is_export(f) for f in files):  # Nsight exports: each may hold several ranks (loader/nsys)
        files, results = _load_with_exports(files, options, executor, progress)
    else:
        if len(files) == 1 and executor in (None, "process") and options.split == 1:
            options = replace(options, split=os.cpu_count() or 1)  # one file: its pieces on every core
        results = map_files(load_file, files, options, executor=executor, progress=progress)
    manifest, manifest_warnings = _manifest_for(paths)
    return assemble(files, results, manifest, (*options.rules.notes, *manifest_warnings))


def load_ranks(path: str, options: LoadOptions) -> list[tuple[EventTable, RankInfo]]:
    """Every rank one file holds: an Nsight export's GPU processes, or a Kineto trace's one rank."""
    if is_export(path):
        return [(table, with_group_ranks(table, info)) for table, info in load_export(path, options)]
    return [load_file(path, options)]


def _load_with_exports(files: list[str], options: LoadOptions, executor, progress) -> tuple[list[str], list]:
    """(a file per rank, (table, info) per rank) of a run given as Nsight exports (and Kineto traces)."""
    per_file = map_files(load_ranks, files, options, executor=executor, progress=progress)
    nsys = [i for i, f in enumerate(files) if is_export(f)]
    out_files, results = assign_ranks([files[i] for i in nsys], [per_file[i] for i in nsys])
    for i, f in enumerate(files):
        if not is_export(f):
            out_files.append(f)
            results += per_file[i]
    return out_files, results


def assemble(
    files: list[str], results: Iterable[tuple[EventTable, RankInfo]], manifest: dict, notes: Sequence[str] = ()
) -> TraceSet:
    """``notes``: run-wide warnings from the options (a user pattern RE2 cannot run)."""
    results = list(results)
    infos, metadata = assemble_infos(
        files, [i for _, i in results], [int(t["ts_ns"].min()) if len(t) else None for t, _ in results], manifest, notes
    )
    tables = {infos_rank: table for infos_rank, (table, _) in zip(_ranks_in_order(files, results, infos), results)}
    return TraceSet(tables, infos, metadata)


def _ranks_in_order(files, results, infos) -> list[int]:
    """The rank each result became (a lone trace without a rank is rank 0)."""
    if len(files) == 1 and results:
        return list(infos)
    return [i.rank for _, i in results]


def assemble_infos(
    files: list[str], infos_in: Sequence[RankInfo], starts: Sequence[int | None], manifest: dict, notes: Sequence[str] = ()
) -> tuple[dict[int, RankInfo], RunMetadata]:
    """The run from each file's RankInfo and first event time (None for an empty table): ranks checked (each once,
    one world size), missing ranks and traces of another run warned about, the manifest's layout and groups. What
    ``assemble`` does without the tables, for an analysis whose tables stay where they were loaded."""
    infos: dict[int, RankInfo] = {}
    first: dict[int, int] = {}
    warnings: list[str] = list(notes)
    for path, info, t0 in zip(files, infos_in, starts):
        check_rank(info)
        rank = info.rank
        if rank < 0 or info.generation.get("rank") == "absent":
            if len(files) > 1:
                raise MissingRankError(
                    f"{path}: no distributedInfo.rank in the trace, and {len(files)} traces were "
                    "given; load it alone or re-record with torch.distributed initialised"
                )
            what = (
                "no distributedInfo"
                if info.generation.get("distributed_info", "absent") == "absent"
                else "no usable rank in distributedInfo"
            )
            warnings.append(f"{path}: {what}; treated as rank 0 of a 1-rank run")
            rank = 0
            info = replace(info, rank=0, world_size=1)
        if rank in infos:
            raise MissingRankError(
                f"{path}: rank {rank} appears twice (also in {infos[rank].source}); "
                "remove the duplicate or load the runs separately"
            )
        infos[rank] = info
        if t0 is not None:
            first[rank] = t0
        warnings += list(info.warnings)
    worlds = {i.world_size for i in infos.values() if i.world_size > 0}
    if len(worlds) > 1:
        raise MissingRankError(
            f"traces of different runs mixed: world sizes {sorted(worlds)} in "
            f"{os.path.dirname(files[0]) or '.'}; load each run's directory separately"
        )
    world = worlds.pop() if worlds else max(len(infos), max(infos, default=-1) + 1)
    infos = {r: i if i.world_size > 0 else replace(i, world_size=world) for r, i in sorted(infos.items())}
    missing = sorted(set(range(world)) - set(infos)) if len(infos) > 1 else []
    if missing:
        warnings.append(f"ranks {_ranges(missing)} of {world} have no trace; cross-rank figures cover the loaded ranks only")
    warnings += _mixed_run_warnings(first)
    backend = next((i.backend for i in infos.values() if i.backend), "")
    layout = _manifest_layout(manifest, warnings)
    groups = manifest.get("process_groups")
    dims = {
        str(g.get("name")): str(g.get("dimension"))
        for g in (groups if isinstance(groups, list) else [])
        if isinstance(g, dict) and g.get("dimension")
    }
    meta = RunMetadata(
        world_size=world,
        backend=backend,
        layout=layout,
        group_dimensions=dims,
        manifest=manifest,
        warnings=tuple(warnings),
        activation=activation_beside(files),
    )
    return infos, meta


def _manifest_layout(manifest: dict, warnings: list[str]) -> ParallelLayout:
    """run.json's layout; a malformed one is a warning and an unknown layout (the analysis goes on)."""
    if manifest.get("layout") is None:
        return ParallelLayout.unknown()
    try:
        return ParallelLayout.from_dict(manifest["layout"], where=f"{MANIFEST} layout")
    except LayoutError as exc:
        warnings.append(f"{exc}; the run's layout is treated as unknown")
        return ParallelLayout.unknown()


def _mixed_run_warnings(starts: dict[int, int]) -> list[str]:
    """Ranks of one run overlap in time up to clock skew; traces hours apart are from different runs. ``starts``:
    rank -> first event time."""
    if len(starts) < 2:
        return []
    lo, hi = min(starts, key=lambda r: starts[r]), max(starts, key=lambda r: starts[r])
    gap_s = (starts[hi] - starts[lo]) / 1e9
    if gap_s > 3600:
        return [
            f"rank {hi} starts {gap_s:.0f} s after rank {lo}: these traces look like different runs; "
            "cross-rank figures will not be meaningful"
        ]
    return []


def _ranges(ranks: list[int]) -> str:
    if len(ranks) > 8:
        return f"{ranks[0]}..{ranks[-1]} ({len(ranks)} ranks)"
    return ", ".join(map(str, ranks))


def _manifest_for(paths) -> tuple[dict, list[str]]:
    """The run.json beside the first path that has one (checked field by field, see
    :mod:`tracekit.formats.manifest`) and the warnings for the fields it dropped."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    for item in items:
        item = os.fspath(item)
        cand = os.path.join(item if os.path.isdir(item) else os.path.dirname(item), MANIFEST)
        if os.path.isfile(cand):
            return read_manifest(cand)
    return {}, []
