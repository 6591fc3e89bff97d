"""Cross-rank matching keys and their validation, on integer codes (no per-instance Python work).

An instance's key is (process group, ``Seq``) for a collective when every instance of its group carries a
sequence number, else (process group, order within the group on its rank); (group, src, dst, order) for a
send/recv. Keys are dense integers here; the text form ("c|<pg>|s|<seq>", "p|<pg>|<src>|<dst>|<order>") is
formatted only for the groups that are reported or numbered, and orders them (match ids follow it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

P2P_OPS = ("send", "recv")
SIZE_FREE_OPS = ("all_to_all",)  # uneven splits: sizes legitimately differ between ranks


@dataclass(frozen=True, slots=True)
class Keys:
    ids: np.ndarray  # per instance: its key's number, -1 where it cannot be matched
    kind: np.ndarray  # per key: 0 collective, 1 point-to-point
    rep: np.ndarray  # per key: the row of one of its instances
    pg: np.ndarray  # per instance: process group name (its ranks when unnamed)
    seqish: np.ndarray  # per instance: "s" (matched on Seq) or "o" (on order)
    a: np.ndarray  # per instance: seq-or-order (collective) or src (p2p)
    b: np.ndarray  # dst (p2p)
    c: np.ndarray  # order (p2p)

    def __len__(self) -> int:
        return len(self.kind)

    def text(self, key: int) -> str:
        r = int(self.rep[key])
        if self.kind[key] == 0:
            return f"c|{self.pg[r]}|{self.seqish[r]}|{int(self.a[r])}"
        return f"p|{self.pg[r]}|{int(self.a[r])}|{int(self.b[r])}|{int(self.c[r])}"

    def in_text_order(self, keys: np.ndarray) -> np.ndarray:
        """The given key numbers sorted by their text (the order of the match ids)."""
        texts = np.array([self.text(int(k)) for k in keys], dtype=object)
        return np.asarray(keys)[np.argsort(texts, kind="stable")] if len(keys) else np.asarray(keys, np.int64)


def dense(*cols: np.ndarray) -> np.ndarray:
    """0..k-1 numbering of the distinct rows of the integer columns (ordered by the columns)."""
    n = len(cols[0])
    if n == 0:
        return np.empty(0, np.int64)
    order = np.lexsort(cols[::-1])
    stacked = np.stack([np.asarray(c, np.int64)[order] for c in cols])
    new = np.concatenate([[True], (stacked[:, 1:] != stacked[:, :-1]).any(axis=0)])
    out = np.empty(n, np.int64)
    out[order] = np.cumsum(new) - 1
    return out


def cumcount(groups: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Each row's position within its group, rows taken in ``order``."""
    g = groups[order]
    s = np.argsort(g, kind="stable")
    gs = g[s]
    idx = np.arange(len(gs))
    first = np.maximum.accumulate(np.where(np.concatenate([[True], gs[1:] != gs[:-1]]), idx, 0))
    out = np.empty(len(groups), np.int64)
    out[order[s]] = idx - first
    return out


def op_codes(op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes in sorted order of the op names (so min/max of codes are min/max of names)."""
    codes, uniques = pd.factorize(op, sort=True)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _is(codes: np.ndarray, uniques: np.ndarray, names) -> np.ndarray:
    return np.isin(codes, [i for i, u in enumerate(uniques) if u in names])


def match_keys(cols: Mapping[str, np.ndarray]) -> Keys:
    op, rank, seq = cols["op"], cols["rank"].astype(np.int64), cols["seq"].astype(np.int64)
    pg = np.where(cols["pg_name"] != "", cols["pg_name"], cols["pg_ranks"])
    pgc = pd.factorize(pg)[0].astype(np.int64)
    code, names = op_codes(op)
    p2p = _is(code, names, P2P_OPS)
    send, recv = _is(code, names, ("send",)), _is(code, names, ("recv",))
    src = np.where(cols["src_rank"] >= 0, cols["src_rank"], np.where(send, rank, -1)).astype(np.int64)
    dst = np.where(cols["dst_rank"] >= 0, cols["dst_rank"], np.where(recv, rank, -1)).astype(np.int64)
    # no process group (old traces), or a fused send_recv without a sequence number (NCCL's SendRecv kernel of
    # a pipeline stage pairs with an unknown peer): nothing safe to match on. A send_recv that carries its
    # group's Seq is a group-wide exchange (tracekit's ring step: every rank of the group takes part).
    matchable = (pg != "") & (op != "") & (~_is(code, names, ("send_recv",)) | (seq >= 0))
    coll = ~p2p & matchable
    pp = p2p & matchable & (src >= 0) & (dst >= 0)
    order = np.argsort(cols["start_ns"], kind="stable")
    use_seq = np.bincount(pgc[coll & (seq < 0)], minlength=int(pgc.max(initial=-1)) + 1) == 0
    u = use_seq[pgc] if len(pgc) else np.zeros(0, bool)
    a = np.where(u, seq, cumcount(dense(coll, rank, pgc), order))
    porder = cumcount(dense(pp, rank, pgc, src, dst), order)
    kind = np.where(pp, 1, 0)
    a = np.where(pp, src, a)
    b, c = np.where(pp, dst, 0), np.where(pp, porder, 0)
    keyed = coll | pp
    ids = np.full(len(op), -1, np.int64)
    ids[keyed] = dense(kind[keyed], pgc[keyed], a[keyed], b[keyed], c[keyed])
    n_keys = int(ids.max(initial=-1)) + 1
    rep = np.zeros(n_keys, np.int64)
    rows = np.flatnonzero(keyed)
    rep[ids[rows]] = rows  # any row of a key has the key's fields
    seqish = np.where(u, "s", "o").astype(object)
    return Keys(ids, kind[rep], rep, pg, seqish, a, b, c)


@dataclass(frozen=True, slots=True)
class Verdict:
    valid: np.ndarray  # per key: >= 2 distinct ranks, each once, same op (send+recv), same size
    bad: np.ndarray  # per key: >= 2 ranks but not a valid match
    what: np.ndarray  # per key: why it is bad ("rank appears twice", "op differs", "size differs")


def validate(keys: Keys, cols: Mapping[str, np.ndarray]) -> Verdict:
    n_keys = len(keys)
    rows = np.flatnonzero(keys.ids >= 0)
    ids = keys.ids[rows]
    rank = cols["rank"][rows].astype(np.int64)
    code, names = op_codes(cols["op"][rows])
    size = np.bincount(ids, minlength=n_keys)
    pairs = dense(ids, rank)
    _, first = np.unique(pairs, return_index=True)
    ranks = np.bincount(ids[first], minlength=n_keys)
    order = np.argsort(ids, kind="stable")
    starts = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)

    def reduce(ufunc, values):
        return ufunc.reduceat(values[order], starts) if n_keys else np.zeros(0, np.int64)

    op_min, op_max = reduce(np.minimum, code), reduce(np.maximum, code)
    sends = np.bincount(ids, weights=_is(code, names, ("send",)), minlength=n_keys)
    recvs = np.bincount(ids, weights=_is(code, names, ("recv",)), minlength=n_keys)
    byt = cols["bytes"][rows].astype(np.int64)
    pmin = reduce(np.minimum, np.where(byt > 0, byt, np.iinfo(np.int64).max))
    pmax = reduce(np.maximum, np.where(byt > 0, byt, -1))
    dup = size != ranks
    op_bad = np.where(keys.kind == 0, op_min != op_max, ~((size == 2) & (sends == 1) & (recvs == 1)))
    size_free = _is(op_min, names, SIZE_FREE_OPS)
    size_bad = (pmax > 0) & (pmin != pmax) & ~size_free
    several = ranks >= 2
    bad = (dup | op_bad | size_bad) & several
    what = np.where(dup, "rank appears twice", np.where(op_bad, "op differs", "size differs")).astype(object)
    return Verdict(several & ~bad, bad, what)
