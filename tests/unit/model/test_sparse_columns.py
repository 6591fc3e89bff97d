"""Sparse EventTable columns (model/columns.py) read, select and replace exactly as the dense columns they stand for.

The oracle is the same table built with plain dense numpy columns: every operation is done on both and every
column compared, so a wrong row mapping in a sparse selection cannot pass.
"""

from __future__ import annotations

import numpy as np
import pytest

from tracekit.model.columns import Columns, Sparse, compact
from tracekit.model.events import COLUMNS, EventTable

SPARSE = ("coll_op_id", "in_bytes", "seq", "mem_device")


def _tables(n: int = 400, seed: int = 0) -> tuple[EventTable, EventTable]:
    rng = np.random.default_rng(seed)
    dense = {k: np.full(n, -1, d) for k, d in COLUMNS.items()}
    dense["ts_ns"] = np.sort(rng.integers(0, 10**9, n))
    dense["dur_ns"] = rng.integers(0, 1000, n)
    dense["kind"] = rng.integers(0, 11, n).astype(np.int8)
    rows = rng.choice(n, n // 20, replace=False)
    dense["coll_op_id"][rows] = rng.integers(0, 5, len(rows))
    dense["in_bytes"][rows[: len(rows) // 2]] = rng.integers(0, 2**40, len(rows) // 2)
    dense["mem_device"][rows[:3]] = 257
    # "seq" stays absent everywhere: a broadcast of -1
    compacted = compact({k: v.copy() for k, v in dense.items()}, SPARSE)
    return EventTable(dense, ()), EventTable(compacted, ())


def _same(a: EventTable, b: EventTable) -> None:
    assert len(a) == len(b)
    for k in COLUMNS:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_compact_keeps_only_the_sparse_columns_sparse():
    dense, sparse = _tables()
    assert isinstance(sparse.columns, Columns)
    assert set(sparse.columns.sparse) == set(SPARSE)
    assert list(sparse.columns) == list(COLUMNS)  # the schema's order
    assert sparse.columns.nbytes < sum(v.nbytes for v in dense.columns.values())
    _same(dense, sparse)


def test_absent_everywhere_is_a_broadcast_and_sparse_reads_are_read_only():
    _, sparse = _tables()
    seq = sparse["seq"]
    assert seq.strides == (0,) and not seq.flags.writeable
    with pytest.raises(ValueError):
        sparse["coll_op_id"][0] = 3  # a fresh array each read: writing to it could never reach the table


@pytest.mark.parametrize("how", ["mask", "sorted", "unsorted", "empty", "repeats"])
def test_select_equals_the_dense_selection(how):
    dense, sparse = _tables(seed=1)
    n = len(dense)
    rng = np.random.default_rng(2)
    index = {
        "mask": rng.random(n) < 0.3,
        "sorted": np.flatnonzero(rng.random(n) < 0.5),
        "unsorted": rng.permutation(n)[: n // 2],
        "empty": np.zeros(0, np.int64),
        "repeats": np.repeat(np.arange(0, n, 7), 2),
    }[how]
    _same(dense.select(index), sparse.select(index))
    if how in ("mask", "sorted"):
        assert isinstance(sparse.select(index).columns, Columns)  # stays sparse


def test_with_columns_replaces_dense_and_sparse_columns():
    dense, sparse = _tables(seed=3)
    step = np.arange(len(dense), dtype=np.int32)
    op = np.zeros(len(dense), np.int32)
    _same(dense.with_columns(step=step, coll_op_id=op), sparse.with_columns(step=step, coll_op_id=op))
    _same(dense.with_columns(step=step).select(step % 3 == 0), sparse.with_columns(step=step).select(step % 3 == 0))


def test_sparse_of_and_take_sorted_against_numpy():
    col = np.full(1000, -1, np.int64)
    col[[3, 500, 999]] = [7, 8, 9]
    s = Sparse.of(col)
    np.testing.assert_array_equal(s.dense(), col)
    index = np.array([0, 3, 4, 999])
    np.testing.assert_array_equal(s.take_sorted(index).dense(), col[index])
