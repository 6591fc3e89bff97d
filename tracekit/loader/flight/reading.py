"""A directory of Flight Recorder dumps -> FlightRun: one dump per rank, either form, any version.

Files: ``<prefix><rank>`` with an optional ``.json``, ``.pkl`` or ``.pickle`` ending (and ``.gz`` after it),
where the prefix is the one given, or else the one every candidate shares (``_dump_``, ``nccl_trace_rank_``,
whatever ``TORCH_FR_DUMP_TEMP_FILE`` named). The form is taken from the bytes: a pickle starts with its PROTO
opcode, JSON with ``{``. Each file is a regular file read up to a size limit (inflated as it streams when
gzip'ed). A dump that cannot be read (refused as unsafe, truncated, not a dump) is left out with a warning that
names it, and its rank counts as absent; when no dump is readable, that is one error line (exit 3).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from ...errors import TraceFormatError
from ...formats.manifest import NAME as MANIFEST
from ...formats.manifest import read_manifest
from ...model.flight import FlightDump, FlightEntries, FlightRun
from ...model.traceset import ProcessGroup
from ...runtime.env import env_limit
from ..files import open_regular
from . import entries as fields
from .safe_pickle import MAX_DEPTH, check_plain, loads_plain

DEFAULT_MAX_DUMP_BYTES = int(env_limit("TRACEKIT_MAX_DUMP_BYTES", 1024**3))
_NAME = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d{1,9})(?P<ext>\.json|\.pkl|\.pickle)?(?P<gz>\.gz)?$")
_SIDECARS = re.compile(r"^(activation_r\d+\.json|rank\d+\.trace\.json(\.gz)?)$")
_CHUNK = 4 * 2**20


class DumpFormatError(TraceFormatError):
    """A file given as a Flight Recorder dump that is not one (or is refused)."""


@dataclass(frozen=True, slots=True)
class FlightReadOptions:
    prefix: str | None = None  # file-name prefix before the rank; None: the one the files share
    max_bytes: int = DEFAULT_MAX_DUMP_BYTES
    world_size: int | None = None  # the run's ranks are 0..world_size-1 (else: from the dumps and run.json)


def dump_files(directory: str, prefix: str | None = None) -> dict[int, list[str]]:
    """rank -> the candidate dump files of ``directory`` (several when a rank has both forms)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise DumpFormatError(f"{directory}: cannot list the directory ({exc.strerror or exc})") from None
    found: dict[str, dict[int, list[str]]] = {}
    for name in names:
        m = _NAME.match(name)
        if m is None or name.startswith(".") or _SIDECARS.match(name) or name == MANIFEST:
            continue
        if prefix is not None and m["prefix"] != prefix:
            continue
        found.setdefault(m["prefix"], {}).setdefault(int(m["rank"]), []).append(os.path.join(directory, name))
    if not found:
        want = f"{prefix}<rank>" if prefix is not None else "<prefix><rank> (such as _dump_0 or nccl_trace_rank_0)"
        raise DumpFormatError(f"{directory}: no Flight Recorder dumps named {want}; pass the folder the dumps were written to")
    if len(found) > 1:
        raise DumpFormatError(
            f"{directory}: dumps under several prefixes ({', '.join(repr(p) for p in sorted(found))}); choose one with --prefix"
        )
    return next(iter(found.values()))


def read_bytes(path: str, max_bytes: int) -> bytes:
    """A regular file's bytes, gzip inflated chunk by chunk, refused past ``max_bytes``."""
    with open_regular(path, DumpFormatError, "Flight Recorder dump") as fh:
        try:
            head = fh.read(_CHUNK)
            if head[:2] != b"\x1f\x8b":
                data = head + fh.read(max(max_bytes + 1 - len(head), 0))
                if len(data) > max_bytes:
                    raise DumpFormatError(_too_large(path, max_bytes))
                return data
            return _inflate(fh, head, path, max_bytes)
        except OSError as exc:
            raise DumpFormatError(f"{path}: read error ({exc.strerror or exc})") from None


def _inflate(fh, data: bytes, path: str, max_bytes: int) -> bytes:
    d, out = zlib.decompressobj(16 + zlib.MAX_WBITS), bytearray()
    while data:
        try:
            out += d.decompress(data, max_bytes + 1 - len(out))
        except zlib.error as exc:
            raise DumpFormatError(f"{path}: corrupt gzip data ({exc}); re-copy the file") from None
        if len(out) > max_bytes:
            raise DumpFormatError(_too_large(path, max_bytes))
        data = d.unconsumed_tail or (b"" if d.eof else fh.read(_CHUNK))
    if not d.eof:
        raise DumpFormatError(f"{path}: the gzip data ends early (a truncated copy?); re-copy the file")
    return bytes(out)


def _too_large(path: str, max_bytes: int) -> str:
    return (
        f"{path}: more than {max_bytes:,} bytes; not a Flight Recorder dump, or raise the limit with "
        "--max-dump-bytes (TRACEKIT_MAX_DUMP_BYTES)"
    )


def decode_dump(data: bytes, source: str) -> tuple[object, str]:
    """The plain data of a dump and its form ("pickle" or "json")."""
    start = data.lstrip()[:1]
    if data[:1] == b"\x80":
        return loads_plain(data, source), "pickle"
    if start == b"{":
        try:
            value = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise DumpFormatError(f"{source}: not valid JSON ({' '.join(str(exc).split())}); give the dump whole") from None
        except RecursionError:
            raise DumpFormatError(f"{source}: JSON nested too deeply to read; a Flight Recorder dump is 6 levels") from None
        check_plain(value, source, max_depth=MAX_DEPTH, max_nodes=max(4 * len(data), 1_000_000))
        return value, "json"
    raise DumpFormatError(
        f"{source}: neither a pickle nor a JSON dump (starts with {data[:8]!r}); give the files "
        "_dump_fr_trace() or _dump_fr_trace_json() wrote"
    )


def read_dump(path: str, rank: int, max_bytes: int = DEFAULT_MAX_DUMP_BYTES) -> tuple[FlightDump, FlightEntries]:
    """One rank's dump: its header and its entries."""
    value, form = decode_dump(read_bytes(path, max_bytes), path)
    if not isinstance(value, Mapping):
        raise DumpFormatError(f"{path}: the dump is a {type(value).__name__}, not a dict; not a Flight Recorder dump")
    if "entries" not in value and "pg_config" not in value and "version" not in value:
        raise DumpFormatError(f"{path}: a {form} dict without entries, pg_config or version; not a Flight Recorder dump")
    log = fields.FieldLog()
    raw = value.get("entries", [])
    if not isinstance(raw, list):
        log.wrong("entries")
        raw = []
    table = FlightEntries.from_columns(fields.entry_columns(rank, raw, log)).ordered()
    version = fields.header_text(value, ("version",), log)
    lib = fields.header_text(value, ("comm_lib_version", "nccl_version"), log)
    groups, status = fields.process_groups(value, log), fields.group_status(value, log)
    notes = [n for n in (log.note(),) if n]
    if version and not version.startswith(("1.", "2.")):
        notes.append(f"dump version {version} is newer than any tracekit knows; read field by field")
    dump = FlightDump(rank, path, form, version, lib, groups, status, len(table), tuple(notes))
    return dump, table


def read_flight_dir(directory: str | os.PathLike, options: FlightReadOptions | None = None) -> FlightRun:
    """Every rank's dump in ``directory`` (see the module docstring)."""
    options = options or FlightReadOptions()
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise DumpFormatError(f"{directory}: not a directory; pass the folder that holds one dump per rank")
    dumps, tables, left_out, warnings, left_ranks = [], [], [], [], []
    for rank, paths in sorted(dump_files(directory, options.prefix).items()):
        if len(paths) > 1:
            warnings.append(f"rank {rank}: {len(paths)} dumps ({', '.join(map(os.path.basename, paths))}); read {paths[0]}")
        try:
            dump, table = read_dump(paths[0], rank, options.max_bytes)
        except TraceFormatError as exc:
            left_out.append(str(exc))
            left_ranks.append(rank)
            warnings.append(f"rank {rank}: dump left out: {exc}")
            continue
        dumps.append(dump)
        tables.append(table)
        warnings += [f"rank {rank}: {paths[0]}: {n}" for n in dump.notes]
    if not dumps:
        raise DumpFormatError(left_out[0] if len(left_out) == 1 else f"{directory}: no readable dump: " + "; ".join(left_out))
    manifest, manifest_warnings = _manifest(directory)
    warnings += manifest_warnings
    groups = _manifest_groups(manifest)
    return FlightRun(
        FlightEntries.concat(tables),
        tuple(dumps),
        _expected_ranks(dumps, manifest, options.world_size, tuple(left_ranks)),
        groups,
        dict(manifest.get("group_dimensions") or {}),
        tuple(left_out),
        tuple(left_ranks),
        tuple(warnings),
        directory,
    )


def _manifest(directory: str) -> tuple[dict, list[str]]:
    path = os.path.join(directory, MANIFEST)
    if not os.path.exists(path):
        return {}, []
    try:
        return read_manifest(path)
    except TraceFormatError as exc:
        return {}, [f"{exc}; read the dumps without it"]


def _manifest_groups(manifest: Mapping) -> tuple[ProcessGroup, ...]:
    out = []
    for g in manifest.get("process_groups") or ():
        try:
            out.append(ProcessGroup.from_dict({**g, "name": str(g.get("name", ""))}))
        except (TypeError, ValueError, AttributeError):
            continue
    return tuple(out)


def _expected_ranks(dumps, manifest: Mapping, world_size: int | None, left_out: tuple[int, ...]) -> tuple[int, ...]:
    """0..n-1 for the largest n anything says: the option, run.json, a group's ranks in a dump's pg_config,
    the highest rank whose file is there (a gap in the numbers is an absent rank)."""
    n = max((d.rank for d in dumps), default=-1) + 1
    n = max(n, max(left_out, default=-1) + 1)
    for d in dumps:
        for pg in d.process_groups:
            n = max(n, max(pg.ranks, default=-1) + 1)
    if isinstance(manifest.get("world_size"), int):
        n = max(n, manifest["world_size"])
    if world_size:
        n = world_size
    return tuple(range(n))
