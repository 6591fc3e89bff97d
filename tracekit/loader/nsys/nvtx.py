"""NVTX ranges of an export as host rows: the user's and the frameworks' ranges (steps, iteration windows,
``--window`` annotations), PyTorch's ``emit_nvtx`` operator ranges, and NCCL's API ranges (their domain named).

A range's name is its registered string (``textId`` -> StringIds) or its inline ``text``: both generations write
both. Marks, thread names and domain records are not ranges; a range without an end (the capture stopped inside
it) is left out. ``emit_nvtx``'s operator ranges are named as Kineto names the operator (``strings``) and
categorised ``cpu_op``; every other range is a ``user_annotation``, as ``record_function`` ranges are on Kineto.
"""

from __future__ import annotations

import numpy as np

from .activities import PID_SHIFT, Rows
from .database import ABSENT, Export, int_of, text_of
from .schema import NVTX, NVTX_DOMAIN_CREATE, NVTX_RANGE_TYPES, STRINGS
from .strings import encode, lookup, merge, op_flag_sql, op_name_sql

NCCL_DOMAIN = "NCCL"
_LOW24 = (1 << 24) - 1


def domains(db: Export) -> dict[int, str]:
    """domainId -> name, from the NvtxDomainCreate records (registered or inline name)."""
    if not db.has(NVTX) or "domainId" not in db.columns(NVTX):
        return {}
    have = db.columns(NVTX)
    name = text_of("text") if "text" in have else "''"
    if "textId" in have and db.has(STRINGS):
        name = f"COALESCE((SELECT value FROM {STRINGS} s WHERE s.id = e.textId), {name})"
    sql = f"SELECT {int_of('domainId')} AS dom, CAST({name} AS TEXT) AS name FROM {NVTX} e WHERE eventType = {NVTX_DOMAIN_CREATE}"
    table = db.arrow(sql)
    if table.num_rows == 0:
        return {}
    doms = table.column("dom").fill_null(ABSENT).to_pylist()
    return {int(d): str(n or "") for d, n in zip(doms, table.column("name").to_pylist()) if d is not None and d >= 0}


def ranges(db: Export) -> Rows | None:
    """The NVTX ranges, with their domain id and the row id their payload is found by."""
    if not db.has(NVTX):
        return None
    have = db.columns(NVTX)
    if not {"start", "end", "eventType"} <= have:
        return None
    where = f'WHERE eventType IN {NVTX_RANGE_TYPES} AND typeof("end") = \'integer\' AND "end" >= start'
    inline = text_of("text") if "text" in have else "''"
    text_id = int_of("textId") if "textId" in have else "NULL"
    gtid = int_of("globalTid") if "globalTid" in have else "NULL"
    dom = int_of("domainId") if "domainId" in have else "NULL"
    sql = (
        f"SELECT {int_of('start')} AS ts, {int_of('end')} AS te, {gtid} AS gtid, {dom} AS dom, rowid AS row, "
        f"{text_id} AS text_id, "
        f"CASE WHEN {text_id} IS NULL THEN {op_name_sql(inline)} ELSE '' END AS inline "
        f"FROM {NVTX} {where}"
    )
    table = db.arrow(sql)
    n = table.num_rows
    cols = {k: _ints(table, k, n) for k in ("ts", "te", "gtid", "dom", "row", "text_id")}
    by_id = lookup(db, f"SELECT textId FROM {NVTX} {where}", cols.pop("text_id"), op_name_sql(text_of("value")))
    inline_codes = encode(table.column("inline")) if n else (np.empty(0, np.int64), [])
    (a, b), names = merge([by_id, inline_codes])
    name = np.where(a >= 0, a, b)
    g = cols.pop("gtid")
    cols["proc"] = np.where(g >= 0, g >> PID_SHIFT, 0)
    cols["tid"] = np.where(g >= 0, g & _LOW24, ABSENT)
    ops = _operator_names(db, where, have)
    is_op = np.array([nm in ops for nm in names] + [False], bool)
    cat = is_op[np.where(name < 0, len(names), name)].astype(np.int64)
    return Rows(cols, name, names, cat, ["user_annotation", "cpu_op"])


def _operator_names(db: Export, where: str, have: frozenset[str]) -> set[str]:
    """The names of emit_nvtx's operator ranges (those that carried its suffixes), as normalised."""
    out: set[str] = set()
    if "textId" in have and db.has(STRINGS):
        v = text_of("value")
        sql = (
            f"SELECT DISTINCT {op_name_sql(v)} AS name FROM {STRINGS} WHERE {op_flag_sql(v)} "
            f"AND id IN (SELECT textId FROM {NVTX} {where})"
        )
        out |= set(db.texts(sql, "name"))
    if "text" in have:
        t = text_of("text")
        out |= set(db.texts(f"SELECT DISTINCT {op_name_sql(t)} AS name FROM {NVTX} {where} AND {op_flag_sql(t)}", "name"))
    return out


def _ints(table, name: str, n: int) -> np.ndarray:
    if n == 0:
        return np.empty(0, np.int64)
    return np.asarray(table.column(name).fill_null(ABSENT).to_numpy(), np.int64)


def nccl_domain_ids(doms: dict[int, str]) -> list[int]:
    return sorted(d for d, name in doms.items() if name == NCCL_DOMAIN)
