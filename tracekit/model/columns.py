"""Columns of an EventTable that are absent on almost every row, kept as (rows, values) instead of n values.

The collective columns (op, group, sizes, ...) are set on the communication rows only and the memory columns on
``[memory]`` and copy rows only: 14 of the schema's 30 columns, ~90 of its ~177 bytes a row, hold -1 on more than
99 % of a typical trace's rows. ``Columns`` is the Mapping an ``EventTable`` reads: dense columns as they are,
sparse ones made on access (a column that is absent everywhere is a read-only broadcast of -1, which costs no
memory; one with a few values is filled anew at each access and dropped by the caller). Selecting rows keeps them
sparse, so neither the loaded table nor the analysis' restepped copies hold the absent values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

ABSENT = -1
SPARSE_SHARE = 1 / 8  # a column is kept sparse when at most this share of its rows has a value


class Sparse:
    """``n`` values of ``dtype``, ABSENT except at ``rows`` (sorted, unique), which hold ``values``."""

    __slots__ = ("n", "rows", "values")

    def __init__(self, n: int, rows: np.ndarray, values: np.ndarray):
        self.n, self.rows, self.values = n, rows, values

    @classmethod
    def of(cls, dense: np.ndarray) -> Sparse:
        rows = np.flatnonzero(dense != ABSENT)
        return cls(len(dense), rows.astype(np.int32 if len(dense) < 2**31 else np.int64), dense[rows])

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def __len__(self) -> int:
        return self.n

    def dense(self) -> np.ndarray:
        """The whole column, read-only (it is made anew: writing to it could not reach the table)."""
        if not len(self.rows):
            return np.broadcast_to(np.array(ABSENT, dtype=self.values.dtype), (self.n,))
        out = np.full(self.n, ABSENT, dtype=self.values.dtype)
        out[self.rows] = self.values
        out.flags.writeable = False
        return out

    def take_sorted(self, index: np.ndarray) -> Sparse:
        """The rows ``index`` (strictly increasing positions) of this column."""
        at = np.searchsorted(index, self.rows)
        hit = at < len(index)
        hit[hit] = index[at[hit]] == self.rows[hit]
        return Sparse(len(index), at[hit].astype(self.rows.dtype), self.values[hit])


def compact(columns: dict[str, np.ndarray | Sparse], candidates) -> Mapping[str, np.ndarray]:
    """``columns`` (emptied: each dense array is let go as soon as it is replaced) with each of ``candidates`` kept
    sparse where at most SPARSE_SHARE of its rows has a value; values that are Sparse already stay so. A plain dict
    when nothing is sparse."""
    order = list(columns)
    dense: dict[str, np.ndarray] = {}
    sparse: dict[str, Sparse] = {}
    for key in order:
        col = columns.pop(key)
        if isinstance(col, Sparse):
            sparse[key] = col
        elif key in candidates and len(col) and np.count_nonzero(col != ABSENT) <= SPARSE_SHARE * len(col):
            sparse[key] = Sparse.of(col)
        else:
            dense[key] = col
        del col
    if not sparse:
        return dense
    return Columns(dense, sparse, order)


class Columns(Mapping):
    """Dense and sparse columns under one Mapping, in the schema's order (see the module's note)."""

    __slots__ = ("dense", "sparse", "order")

    def __init__(self, dense: dict[str, np.ndarray], sparse: dict[str, Sparse], order: list[str]):
        self.dense, self.sparse, self.order = dense, sparse, order

    def __getitem__(self, key: str) -> np.ndarray:
        col = self.dense.get(key)
        if col is not None:
            return col
        return self.sparse[key].dense()

    def peek(self, key: str) -> np.ndarray | Sparse | None:
        """The column as stored (a Sparse has ``dtype`` and ``len``): for checks that need not read the values."""
        col = self.dense.get(key)
        return col if col is not None else self.sparse.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self.dense or key in self.sparse

    def __iter__(self) -> Iterator[str]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)

    @property
    def nbytes(self) -> int:
        """Bytes held (the sparse columns' rows and values only)."""
        return sum(v.nbytes for v in self.dense.values()) + sum(s.rows.nbytes + s.values.nbytes for s in self.sparse.values())

    def take(self, index: np.ndarray) -> Mapping[str, np.ndarray]:
        """The rows ``index`` (a boolean mask or positions) of every column; sparse columns stay sparse when the
        positions are increasing (a mask, ``np.flatnonzero``), else they are made dense first."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        dense = {k: v[index] for k, v in self.dense.items()}
        if len(index) < 2 or bool(np.all(index[1:] > index[:-1])):
            return Columns(dense, {k: s.take_sorted(index) for k, s in self.sparse.items()}, self.order)
        dense.update((k, s.dense()[index]) for k, s in self.sparse.items())
        return {k: dense[k] for k in self.order}

    def replace(self, updates: Mapping[str, np.ndarray]) -> Columns:
        """These columns with ``updates`` (dense arrays) in place of theirs."""
        return Columns({**self.dense, **updates}, {k: s for k, s in self.sparse.items() if k not in updates}, self.order)
