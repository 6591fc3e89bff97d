"""NCCL's NVTX payloads: communicator, message size, peer, root, rank count and datatype of each NCCL API range.

NCCL (2.17+) attaches a binary payload to each API range (``src/include/nvtx_payload_schemas.h``; entry names
below are NCCL's), described by a schema it registers. An export holds the schemas in ``NVTX_PAYLOAD_SCHEMAS``
(domainId, schemaId, payloadSize) and ``NVTX_PAYLOAD_SCHEMA_ENTRIES`` (idx, type, name, offset), and each
range's payload in ``NVTX_EVENTS.binaryData``: a 32-byte header (domain id, schema id, payload size, header
size; little-endian uint64) then the payload. Decoding is vectorised per schema: the blobs of one schema are read
as one byte matrix and each entry's bytes as one column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .database import ABSENT, Export, int_of, text_of
from .schema import NVTX, PAYLOAD_ENTRIES, PAYLOAD_SCHEMAS

HEADER_BYTES = 32
# NCCL's entry names -> the field they fill (older NCCL wrote "Bytes" for broadcast and send/recv)
FIELDS = {
    "NCCL communicator ID": "comm",
    "Message size [bytes]": "bytes",
    "Bytes": "bytes",
    "Peer rank": "peer",
    "Root": "root",
    "No. of ranks": "nranks",
    "Rank": "myrank",
    "Datatype": "datatype",
}
# NVTX payload entry types (nvToolsExtPayload.h) -> (bytes, signed), LP64; a registered enum/schema type is 4 bytes
_TYPES = {1: (1, True), 2: (1, False), 3: (2, True), 4: (2, False), 5: (4, True), 6: (4, False), 7: (8, True), 8: (8, False)}
_TYPES |= {9: (8, True), 10: (8, False), 11: (1, True), 12: (1, False), 13: (2, True), 14: (2, False), 15: (4, True)}
_TYPES |= {16: (4, False), 17: (8, True), 18: (8, False), 22: (8, False), 23: (8, False)}
_ENUM_TYPE = (4, False)
_SCHEMA_ID_START = 1 << 24
# ncclDataType_t (nccl.h) -> tracekit's dtype names
DATATYPES: tuple[str, ...] = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64")
DATATYPES += ("bfloat16", "float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True, slots=True)
class Entry:
    field: str
    offset: int
    size: int
    signed: bool


def schemas(db: Export) -> dict[tuple[int, int], tuple[int, list[Entry]]]:
    """(domainId, schemaId) -> (payload size, the entries tracekit reads), for the schemas of NCCL's fields."""
    if not (db.has(PAYLOAD_SCHEMAS) and db.has(PAYLOAD_ENTRIES)):
        return {}
    sql = f"SELECT {int_of('domainId')} AS dom, {int_of('schemaId')} AS sid, {int_of('payloadSize')} AS size"
    head = db.ints(f"{sql} FROM {PAYLOAD_SCHEMAS}", ("dom", "sid", "size"))
    sizes = {(int(d), int(s)): int(z) for d, s, z in zip(head["dom"], head["sid"], head["size"])}
    ents = db.arrow(
        f"SELECT {int_of('domainId')} AS dom, {int_of('schemaId')} AS sid, {int_of('idx')} AS idx, {int_of('type')} AS type, "
        f"{text_of('name')} AS name, {int_of('offset')} AS off FROM {PAYLOAD_ENTRIES} ORDER BY dom, sid, idx"
    ).to_pydict()  # one row per schema entry: a few dozen
    out: dict[tuple[int, int], tuple[int, list[Entry]]] = {}
    cursor: dict[tuple[int, int], int] = {}
    for dom, sid, typ, name, off in zip(ents["dom"], ents["sid"], ents["type"], ents["name"], ents["off"]):
        key = (int(dom if dom is not None else -1), int(sid if sid is not None else -1))
        size, signed = _TYPES.get(int(typ or 0), _ENUM_TYPE if (typ or 0) >= _SCHEMA_ID_START else (0, False))
        at = cursor.get(key, 0)
        if off is not None and off > 0:
            at = int(off)
        elif size:
            at = -(-at // size) * size  # no offset given: the next naturally aligned place
        cursor[key] = at + size
        field = FIELDS.get(str(name))
        if field and size and key in sizes:
            out.setdefault(key, (sizes[key], []))[1].append(Entry(field, at, size, signed))
    return out


def decode(db: Export, domain_ids: list[int]) -> dict[str, np.ndarray]:
    """Per payload row of the domains ``domain_ids``: ``row`` (NVTX_EVENTS rowid) and each field (-1 absent)."""
    import pyarrow as pa

    empty = {"row": np.empty(0, np.int64), **{f: np.empty(0, np.int64) for f in set(FIELDS.values())}}
    known = schemas(db)
    if not domain_ids or not known or "binaryData" not in db.columns(NVTX):
        return empty
    doms = ", ".join(str(int(d)) for d in domain_ids)
    table = db.arrow(
        f"SELECT rowid AS row, CAST(binaryData AS BLOB) AS blob FROM {NVTX} "
        f"WHERE domainId IN ({doms}) AND typeof(binaryData) = 'blob' AND length(binaryData) > {HEADER_BYTES}"
    )
    if table.num_rows == 0:
        return empty
    rows = np.asarray(table.column("row").to_numpy(), np.int64)
    blob = table.column("blob").combine_chunks()
    width = 8 if pa.types.is_large_binary(blob.type) else 4
    offsets = np.frombuffer(blob.buffers()[1], f"<i{width}", len(blob) + 1, blob.offset * width).astype(np.int64)
    data = np.frombuffer(blob.buffers()[2], np.uint8)
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    dom, sid = _u64(data, starts), _u64(data, starts + 8)
    payload_size, header = _u64(data, starts + 16), _u64(data, starts + 24)
    header = np.where((header >= HEADER_BYTES) & (header < lengths), header, HEADER_BYTES)
    out = {k: np.full(len(rows), ABSENT, np.int64) for k in empty if k != "row"}
    for (d, s), (size, entries) in known.items():
        hit = (dom == d) & (sid == s) & (lengths >= header + size) & (payload_size >= size)
        if not hit.any():
            continue
        base = starts[hit] + header[hit]
        for e in entries:
            out[e.field][hit] = _read(data, base + e.offset, e.size, e.signed)
    return {"row": rows, **out}


def _u64(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Little-endian uint64 at byte positions ``at`` (as int64; values past 2**63 wrap, none such is valid)."""
    return _read(data, at, 8, False)


def _read(data: np.ndarray, at: np.ndarray, size: int, signed: bool) -> np.ndarray:
    at = np.asarray(at, np.int64)
    ok = (at >= 0) & (at + size <= len(data))
    idx = np.where(ok, at, 0)[:, None] + np.arange(size)
    raw = np.ascontiguousarray(data[idx]).view(f"<{'i' if signed else 'u'}{size}").reshape(-1)
    return np.where(ok, raw.astype(np.int64), ABSENT)


def datatype_name(code: int) -> str | None:
    return DATATYPES[code] if 0 <= code < len(DATATYPES) else None
