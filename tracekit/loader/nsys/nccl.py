"""NCCL's API ranges as the host side of collectives: op, bytes and communicator for cross-rank matching, as
``record_param_comms`` gives them on a Kineto trace.

Each NCCL call (``ncclAllReduce``, ``ncclSend``, ...) is an NVTX range in the ``NCCL`` domain on the calling
thread, around the launch of its kernel; its payload (``payloads``) names the communicator and the message size.
The communicator id (NCCL's commHash, the same on every member) is the process group; its size and this rank's
place in it come from the ``ncclCommInitRank``/``ncclCommSplit`` ranges' payloads. Calls between
``ncclGroupStart`` and ``ncclGroupEnd`` are launched together by the group's end: the end takes what they share
(one op on one communicator; sends and receives to every peer are an all-to-all, a send and a receive a
send_recv), so that the kernel it launches is linked to it.

Sizes: NCCL's message size is one rank's buffer (``count * sizeof(type)``); tracekit's bytes are nccl-tests'
whole buffer, so all_gather's output and reduce_scatter's input are the message times the communicator size.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..classify import normalize_op
from .database import ABSENT
from .payloads import datatype_name

_ALIASES = {"ncclBcast": "broadcast", "ncclAllToAll": "all_to_all", "ncclAlltoAll": "all_to_all"}
GROUP_START, GROUP_END = "ncclGroupStart", "ncclGroupEnd"
_TIMES_N = {"all_gather": (1, "n"), "reduce_scatter": ("n", 1), "all_to_all": ("n", "n"), "send": (1, 0), "recv": (0, 1)}


def op_of(name: str) -> str:
    return _ALIASES.get(name) or normalize_op(name)


def collectives(ts, te, tid, names: list[str], name: np.ndarray, nccl: np.ndarray, pay: dict[str, np.ndarray]) -> dict:
    """Per row (the NCCL calls among the NVTX ranges): the collective columns (texts as str objects, None absent;
    ints -1 absent). ``pay``: the payload fields per row (-1 absent). Rows outside ``nccl`` get nothing."""
    n = len(name)
    ops = np.array([op_of(nm) for nm in names] + [""], object)[np.where(name < 0, len(names), name)]
    ops = np.where(nccl, ops, "")
    comm = np.where(nccl, pay["comm"], ABSENT)
    sizes, mine = _communicators(comm, pay["nranks"], pay["myrank"])
    n_ranks = np.array([sizes.get(int(c), ABSENT) for c in comm.tolist()], np.int64) if n else np.zeros(0, np.int64)
    my = np.array([mine.get(int(c), ABSENT) for c in comm.tolist()], np.int64) if n else np.zeros(0, np.int64)
    out = {
        "op": np.where(ops == "", np.array(None, object), ops),
        "pg_name": np.array(
            [f"0x{int(c) & (2**64 - 1):016x}" if c != ABSENT and c != 0 else None for c in comm.tolist()], object
        ),
        "group_size": n_ranks,
        "dtype": np.array([datatype_name(int(d)) for d in pay["datatype"].tolist()], object),
    }
    out["in_bytes"], out["out_bytes"] = _bytes(ops, pay["bytes"], n_ranks)
    send, recv = ops == "send", ops == "recv"
    out["src_rank"] = np.where(send, my, np.where(recv, pay["peer"], ABSENT))
    out["dst_rank"] = np.where(send, pay["peer"], np.where(recv, my, ABSENT))
    _groups(out, ts, te, tid, names, name, nccl)
    return out


def _communicators(comm, nranks, myrank) -> tuple[dict[int, int], dict[int, int]]:
    """comm id -> size, comm id -> this rank's place in it, from the calls whose payload names them."""
    known = (comm != ABSENT) & (nranks > 0)
    sizes = dict(zip(comm[known].tolist(), nranks[known].tolist()))
    placed = known & (myrank >= 0) & (myrank < nranks)
    return sizes, dict(zip(comm[placed].tolist(), myrank[placed].tolist()))


def _bytes(ops: np.ndarray, size: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(in, out) bytes of each call from its message size and its communicator's size."""
    ins, outs = size.copy(), size.copy()
    for op, (a, b) in _TIMES_N.items():
        m = ops == op
        for arr, f in ((ins, a), (outs, b)):
            if f == "n":
                arr[m] = np.where((n[m] > 0) & (size[m] >= 0), size[m] * np.maximum(n[m], 1), ABSENT)
            elif f == 0:
                arr[m] = ABSENT
    return ins, outs


def _groups(out: dict, ts, te, tid, names: list[str], name: np.ndarray, nccl: np.ndarray) -> None:
    """Give each top-level ncclGroupEnd what the calls of its group share (see the module's note)."""
    rows = np.flatnonzero(nccl)
    if not len(rows) or GROUP_END not in names:
        return
    rows = rows[np.lexsort((-(te[rows] - ts[rows]), ts[rows], tid[rows]))]
    t, e = tid[rows], te[rows]
    first = np.r_[True, t[1:] != t[:-1]]
    # nested in an earlier NCCL range of its thread (ncclSend's own group calls): not a top-level call
    seg = np.cumsum(first) - 1
    lo = int(e.min()) - 1
    span = int(e.max()) - lo + 1
    reach = np.maximum.accumulate(seg * span + (e - lo)) - seg * span + lo
    nested = np.r_[False, reach[:-1] >= e[1:]] & ~first
    top = rows[~nested]
    tt = tid[top]
    code = name[top]
    start = code == names.index(GROUP_START) if GROUP_START in names else np.zeros(len(top), bool)
    end = code == names.index(GROUP_END)
    # depth per thread: +1 at a start, -1 at an end; a group closes at an end that brings it back to 0
    seg_t = np.cumsum(np.r_[True, tt[1:] != tt[:-1]]) - 1
    step = start.astype(np.int64) - end.astype(np.int64)
    depth = np.cumsum(step)
    depth -= np.repeat(np.r_[0, depth[:-1]][np.r_[True, tt[1:] != tt[:-1]]], np.bincount(seg_t))
    closes = end & (depth == 0)
    close_pos = np.flatnonzero(closes)
    if not len(close_pos):
        return
    member = ~start & ~end & (depth > 0)
    at = np.searchsorted(close_pos, np.arange(len(top)))
    ok = member & (at < len(close_pos))
    ok[ok] = seg_t[close_pos[at[ok]]] == seg_t[ok]
    if not ok.any():
        return
    frame = pd.DataFrame(
        {
            "end": top[close_pos[at[ok]]],
            "row": top[ok],
            "op": out["op"][top[ok]],
            "pg": out["pg_name"][top[ok]],
            "in": out["in_bytes"][top[ok]],
            "out": out["out_bytes"][top[ok]],
            "n": out["group_size"][top[ok]],
            "peer": np.where(out["op"][top[ok]] == "send", out["dst_rank"][top[ok]], out["src_rank"][top[ok]]),
        }
    )
    for end_row, g in frame.groupby("end", sort=False):
        op = _group_op(g)
        if not op or g["pg"].nunique(dropna=False) != 1:
            continue
        i = int(end_row)
        out["op"][i], out["pg_name"][i], out["group_size"][i] = op, g["pg"].iloc[0], int(g["n"].max())
        out["in_bytes"][i] = _sum(g["in"]) if op not in ("recv",) else ABSENT
        out["out_bytes"][i] = _sum(g["out"]) if op not in ("send",) else ABSENT
        if op in ("send", "recv") and len(g) == 1:
            for k in ("src_rank", "dst_rank"):
                out[k][i] = out[k][int(g["row"].iloc[0])]


def _group_op(g: pd.DataFrame) -> str | None:
    ops = set(g["op"].dropna())
    if len(ops) == 1:
        return next(iter(ops))
    if ops == {"send", "recv"}:
        n = int(g["n"].max())
        peers = g["peer"][g["peer"] >= 0].nunique()
        return "all_to_all" if n > 2 and peers >= n - 1 else "send_recv"
    return None


def _sum(values: pd.Series) -> int:
    v = values.to_numpy(np.int64)
    return int(v[v >= 0].sum()) if (v >= 0).any() else ABSENT
