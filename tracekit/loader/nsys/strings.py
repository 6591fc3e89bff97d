"""Names from an export's ``StringIds``: only the strings the events use, fetched by a join in SQLite, and coded per
unique name with Arrow's dictionary encoding (no Python loop per event).

Nsight names that differ from Kineto's for the same thing are normalised here, so that every name rule sees what
it sees on a Kineto trace: CUDA API calls lose the API-version suffix nsys adds (``cudaLaunchKernel_v7000`` ->
``cudaLaunchKernel``), and the NVTX ranges ``torch.autograd.profiler.emit_nvtx`` writes lose the sequence number,
op id and shapes it appends (``aten::mm, seq = 12, op_id = 40, sizes = [[8, 8]]`` -> ``aten::mm``).
"""

from __future__ import annotations

import numpy as np

from .database import ABSENT, Export, int_of, text_of
from .schema import STRINGS

_LITERAL_IDS = 50_000
# emit_nvtx's suffixes, in the order it appends them (torch's profiler: name, seq, op_id, sizes, input_op_ids)
_EMIT_NVTX_MARKERS = (", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = ")


def strip_version_sql(expr: str) -> str:
    """SQL that drops a trailing ``_v<digits>`` (nsys's CUDA API-version suffix) from ``expr``."""
    pos = f"instr({expr}, '_v')"
    tail = f"substr({expr}, {pos} + 2)"
    return (
        f"CASE WHEN {pos} > 1 AND length({tail}) BETWEEN 1 AND 6 AND {tail} NOT GLOB '*[^0-9]*' "
        f"THEN substr({expr}, 1, {pos} - 1) ELSE {expr} END"
    )


def op_name_sql(expr: str) -> str:
    """SQL of ``expr`` without emit_nvtx's suffixes (the op name before the first of them)."""
    out = expr
    for marker in reversed(_EMIT_NVTX_MARKERS):
        out = f"CASE WHEN instr({expr}, '{marker}') > 0 THEN substr({expr}, 1, instr({expr}, '{marker}') - 1) ELSE {out} END"
    return out


def op_flag_sql(expr: str) -> str:
    """SQL that is 1 where ``expr`` carries one of emit_nvtx's suffixes (a PyTorch operator), else 0."""
    return "(" + " OR ".join(f"instr({expr}, '{m}') > 0" for m in _EMIT_NVTX_MARKERS) + ")"


def encode(column) -> tuple[np.ndarray, list[str]]:
    """(code per row, the unique values) of an Arrow string column; '' is absent (-1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(column) == 0:
        return np.empty(0, np.int64), []
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        column = pc.cast(column, pa.string())
    enc = pc.dictionary_encode(column).combine_chunks() if isinstance(column, pa.ChunkedArray) else pc.dictionary_encode(column)
    uniques = [str(v) for v in enc.dictionary.to_pylist()]
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if "" in uniques:
        codes = np.where(codes == uniques.index(""), ABSENT, codes)
    return codes, uniques


def lookup(db: Export, used_sql: str, ids: np.ndarray, value_sql: str | None = None) -> tuple[np.ndarray, list[str]]:
    """(code per entry of ``ids``, unique names) for the StringIds ids ``ids``; ``used_sql`` selects the ids the
    events use (the strings fetched), ``value_sql`` rewrites each string in SQL (a normalisation)."""
    if not db.has(STRINGS) or not len(ids):
        return np.full(len(ids), ABSENT, np.int64), []
    value = value_sql or text_of("value")
    wanted = np.unique(ids[ids >= 0])
    if len(wanted) <= _LITERAL_IDS:  # the few names of the events: fetched by id, without scanning the events again
        used_sql = ", ".join(map(str, wanted.tolist())) or "NULL"
    table = db.arrow(f"SELECT {int_of('id')} AS id, {value} AS value FROM {STRINGS} WHERE id IN ({used_sql})")
    if table.num_rows == 0:
        return np.full(len(ids), ABSENT, np.int64), []
    sids = np.asarray(table.column("id").fill_null(ABSENT).to_numpy(), np.int64)
    codes, uniques = encode(table.column("value"))
    order = np.argsort(sids, kind="stable")
    sids, codes = sids[order], codes[order]
    pos = np.clip(np.searchsorted(sids, ids), 0, len(sids) - 1)
    hit = sids[pos] == ids
    return np.where(hit & (ids >= 0), codes[pos], ABSENT), uniques


def merge(parts: list[tuple[np.ndarray, list[str]]]) -> tuple[list[np.ndarray], list[str]]:
    """Codes into one shared name list for several (codes, uniques) pairs (a dict pass over the uniques only)."""
    names: dict[str, int] = {}
    out = []
    for codes, uniques in parts:
        remap = np.array([names.setdefault(u, len(names)) for u in uniques] + [ABSENT], np.int64)
        out.append(remap[np.where(codes < 0, len(uniques), codes)])
    return out, list(names)


def normalised_value(kind: str) -> str:
    """The SQL of a StringIds value as the events of ``kind`` ("runtime" or "nvtx") name it."""
    v = text_of("value")
    return strip_version_sql(v) if kind == "runtime" else op_name_sql(v)
