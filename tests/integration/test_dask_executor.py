"""The per-rank load map on a Dask distributed cluster (two worker processes on loopback) gives exactly the
serial load: same ranks, same RankInfo, every column equal."""

import numpy as np
import pytest

from tests.helpers.data import gpu_trace
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import COLUMNS

distributed = pytest.importorskip("distributed")

FILES = [gpu_trace("pp-sendrecv-128rank-rank0.json.gz"), gpu_trace("pp-sendrecv-128rank-rank1.json.gz")]


@pytest.mark.slow
def test_dask_local_cluster_equals_serial_load():
    options = LoadOptions(cache=False)
    serial = load(FILES, options=options, executor="serial", progress=False)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            via_client = load(FILES, options=options, executor=client, progress=False)
            workers = client.scheduler_info()["workers"]
        assert len(workers) == 2
        via_address = load(
            FILES, options=options, executor=f"dask://{cluster.scheduler_address.split('://')[-1]}", progress=False
        )
    for got in (via_client, via_address):
        assert got.ranks == serial.ranks == [0, 1]
        for rank in serial.ranks:
            a, b = got.table(rank), serial.table(rank)
            assert len(a) > 1000 and a.strings == b.strings
            for key in COLUMNS:
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"rank {rank} {key}")
            assert got.info(rank).to_dict() == serial.info(rank).to_dict()
