"""Every real GPU trace loads; figures are checked against an independent reading with json + Decimal
and against the counts documented with the fixtures."""

import gzip
import json
from collections import Counter
from decimal import Decimal

import numpy as np
import pytest

from tests.helpers.data import gpu_trace
from tracekit.loader.loading import LoadOptions, load, load_file
from tracekit.model.events import EventKind as K

FIXTURES = {
    # file: (rank, world, device_type, {nccl op: count}, steps, device streams)
    "allreduce-broadcast-2rank-rank0.json.gz": (0, 2, "cuda", {"all_reduce": 15, "broadcast": 6}, [4, 5, 6], [(0, 7), (0, 40)]),
    "ddp-allreduce-2rank-rank1-oldformat.json.gz": (1, 2, "cuda", {"all_reduce": 2020}, [2, 3, 4, 5, 6], [(1, 7), (1, 14)]),
    # the 10 ncclKernel_SendRecv kernels carry no collective args; each launch call sits directly inside
    # nccl:all_to_all (4), nccl:all_reduce (4) or nccl:_all_gather_base (2): the launch context is the op
    "pp-sendrecv-128rank-rank0.json.gz": (
        0,
        128,
        "cuda",
        {"all_to_all": 4, "all_reduce": 4, "all_gather": 2},
        [551, 552],
        [(0, 7), (0, 23), (0, 25), (0, 84), (0, 203)],
    ),
    "pp-sendrecv-128rank-rank1.json.gz": (
        1,
        128,
        "cuda",
        {"all_to_all": 4, "all_reduce": 4, "all_gather": 2},
        [551, 552],
        [(1, 7), (1, 23), (1, 25), (1, 84), (1, 203)],
    ),
    "single-rank-nocomm-nsresolution.json.gz": (0, 1, "cuda", {}, [101, 102, 103, 104, 105], [(0, 7)]),
    # no distributedInfo: rank 0 of a 1-rank run (before: -1 of -1, which crashed report and --timeline-out)
    "rocm-mi250-minitoy.json.gz": (0, 1, "rocm", {}, [1, 2], [(2, 0)]),
}
# distributedInfo without pg_config: collectives are put on the world group, and the loader says so
WORLD_GROUP_ASSUMED = {
    "ddp-allreduce-2rank-rank1-oldformat.json.gz": 2020,
    "pp-sendrecv-128rank-rank0.json.gz": 10,
    "pp-sendrecv-128rank-rank1.json.gz": 10,
}


def oracle(path):
    """An independent reading: plain json, exact decimal time arithmetic."""
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)  # exact: epoch-µs timestamps with ns digits
    base = Decimal(doc.get("baseTimeNanoseconds", 0))
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") not in ("Trace", "python_function")]
    lo = min(base + Decimal(str(e["ts"])) * 1000 for e in xs)
    hi = max(base + (Decimal(str(e["ts"])) + Decimal(str(e.get("dur", 0)))) * 1000 for e in xs)
    kernels = [e for e in xs if e["cat"] == "kernel"]
    return doc, int(lo.to_integral_value()), int(hi.to_integral_value()), len(kernels)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_loads_with_exact_figures(name):
    rank, world, device_type, ops, steps, streams = FIXTURES[name]
    table, info = load_file(gpu_trace(name), LoadOptions(cache=False))
    doc, lo, hi, n_kernels = oracle(gpu_trace(name))
    assert (info.rank, info.world_size, info.device_type) == (rank, world, device_type)
    comm = table.mask_kind(K.COMM)
    assert dict(Counter(table.decode("coll_op_id")[comm])) == ops
    assert sorted(table["step"][table.mask_kind(K.STEP)].tolist()) == steps
    dev = table.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET)
    assert sorted(set(zip(table["device"][dev].tolist(), table["stream"][dev].tolist()))) == streams
    assert int(table.mask_kind(K.KERNEL, K.COMM).sum()) == n_kernels
    assert abs(int(table["ts_ns"].min()) - lo) <= 1 and abs(int(table.end_ns.max()) - hi) <= 1
    if name in WORLD_GROUP_ASSUMED:
        (warning,) = info.warnings
        assert f"{WORLD_GROUP_ASSUMED[name]} collectives without a group are assumed to run on the world" in warning
        assert set(table.decode("pg_name_id")[comm]) == {"0"}
    else:
        assert not info.warnings


def test_process_group_metadata_from_kernel_args():
    table, info = load_file(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), LoadOptions(cache=False))
    assert [(pg.name, pg.desc, pg.ranks, pg.size) for pg in info.process_groups] == [("0", "default_pg", (0, 1), 2)]
    assert info.nccl_version == "2.17.1"
    comm = table.mask_kind(K.COMM)
    assert set(table.decode("pg_desc_id")[comm]) == {"default_pg"}
    assert set(table.decode("dtype_id")[comm]) == {"Float", "Long"}  # all-reduces in fp32, broadcasts of int64
    assert (table["group_size"][comm] == 2).all()
    size = {"Float": 4, "Long": 8}
    per_elem = np.array([size[d] for d in table.decode("dtype_id")[comm]])
    assert (table["in_bytes"][comm] == table["in_nelems"][comm] * per_elem).all()
    ar = comm & (table.decode("coll_op_id") == "all_reduce")
    # the largest all-reduce in the file carries 7,875,584 fp32 elements (read off the raw JSON)
    assert table["in_nelems"][ar].max() == 7875584 and table["in_bytes"][ar].max() == 7875584 * 4


def test_old_generation_pg_uid_and_process_group_id():
    table, info = load_file(gpu_trace("single-rank-nocomm-nsresolution.json.gz"), LoadOptions(cache=False))
    assert info.generation["pg_config"] == "uid"
    assert [(pg.name, pg.ranks) for pg in info.process_groups] == [("0", (0,))]
    rpc = table.mask_kind(K.CPU_COMM_OP) & (table.decode("name_id") == "record_param_comms")
    # the older "Process Group ID" key fills the group name
    assert set(table.decode("pg_name_id")[rpc & (table["coll_op_id"] >= 0)]) == {"0"}
    assert info.generation["base_time"] == "absent"


def test_device_work_takes_the_step_of_its_launch():
    table, _ = load_file(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), LoadOptions(cache=False))
    kern = np.flatnonzero(table.mask_kind(K.KERNEL, K.COMM) & (table["correlation"] >= 0))
    rt = table.mask_kind(K.RUNTIME)
    launch_step = dict(zip(table["correlation"][rt].tolist(), table["step"][rt].tolist()))
    checked = 0
    for i in kern:
        c = int(table["correlation"][i])
        if c in launch_step:
            assert table["step"][i] == launch_step[c]
            checked += 1
    assert checked > 2000


def test_directory_of_one_run_and_duplicate_ranks(tmp_path):
    import shutil

    from tracekit.errors import MissingRankError

    d = tmp_path / "pp"
    d.mkdir()
    for r in (0, 1):
        shutil.copy(gpu_trace(f"pp-sendrecv-128rank-rank{r}.json.gz"), d)
    ts = load(str(d), executor="serial")
    assert ts.ranks == [0, 1] and ts.metadata.world_size == 128
    assert any("ranks 2..127" in w for w in ts.metadata.warnings)
    shutil.copy(gpu_trace("allreduce-broadcast-2rank-rank0.json.gz"), d)
    with pytest.raises(MissingRankError, match="rank 0 appears twice"):
        load(str(d), executor="serial")
