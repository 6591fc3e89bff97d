"""The loader keeps the collective and memory columns sparse (model/columns.py) and they read as dense ones."""

from __future__ import annotations

import numpy as np

from tracekit.loader.loading import LoadOptions, load_file
from tracekit.model.columns import SPARSE_SHARE, Columns
from tracekit.model.events import COLUMNS, EventTable


def test_a_loaded_trace_is_stored_sparse_and_reads_as_its_dense_columns():
    """The loader keeps the collective and memory columns of a real trace sparse where they are (about 0.3 % of
    this trace's rows are collectives), and the columns read back are those of a dense build of the same table."""
    table, _ = load_file("tests/data/kineto-gpu/ddp-allreduce-2rank-rank1-oldformat.json.gz", LoadOptions(cache=False))
    cols = table.columns
    assert isinstance(cols, Columns)
    for key, s in cols.sparse.items():
        assert len(s.rows) <= SPARSE_SHARE * len(table), key
    dense = EventTable({k: np.array(table[k]) for k in COLUMNS}, table.strings)
    assert cols.nbytes < sum(dense[k].nbytes for k in COLUMNS)
    comm = np.flatnonzero(table["coll_op_id"] >= 0)
    assert len(comm) > 0
    sel = table.select(comm)
    for k in COLUMNS:
        np.testing.assert_array_equal(dense.select(comm)[k], sel[k], err_msg=k)
