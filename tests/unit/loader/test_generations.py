"""Hand-built traces, one per trace-format generation (DESIGN.md), each with a known answer."""

import numpy as np
import pytest

from tests.helpers.kineto import LAUNCH, STEP, kernel, load, trace, write
from tracekit.loader.loading import LoadOptions, load_file
from tracekit.model.events import EventKind as K


def test_old_msg_size_and_process_group_id(tmp_path):
    k = kernel(
        "ncclKernel_AllGather_RING_LL_Sum_bfloat16(ncclDevComm*)",
        250,
        10,
        **{
            "Collective name": "_allgather_base",
            "In msg size": 1024,
            "Out msg size": 2048,
            "dtype": "BFloat16",
            "Process Group ID": 3,
            "Group size": 2,
        },
    )
    table, info = load(write(tmp_path, trace([STEP, LAUNCH, k], distributedInfo={"rank": 1, "world_size": 2})))
    row = np.flatnonzero(table.mask_kind(K.COMM))[0]
    assert table.string(table["coll_op_id"][row]) == "all_gather"
    assert table.string(table["pg_name_id"][row]) == "3"
    assert (table["in_nelems"][row], table["out_nelems"][row]) == (1024, 2048)
    assert (table["in_bytes"][row], table["out_bytes"][row]) == (2048, 4096)
    assert table["step"][row] == 7  # launched inside ProfilerStep#7, ran after it ended
    assert info.generation["msg_fields"] == "size" and info.generation["distributed_info"] == "basic"


def test_new_nelems_seq_and_p2p_ranks(tmp_path):
    k = kernel(
        "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
        150,
        10,
        **{
            "Collective name": "send",
            "In msg nelems": 8,
            "Out msg nelems": 8,
            "dtype": "Float",
            "Seq": 5,
            "Process Group Name": "7",
            "Process Group Description": "PIPELINE_MODEL_PARALLEL_GROUP",
            "Process Group Ranks": "[0, 4]",
            "Src Rank": 0,
            "Dst Rank": 4,
        },
    )
    table, _ = load(write(tmp_path, trace([STEP, LAUNCH, k], distributedInfo={"rank": 0, "world_size": 8})))
    row = np.flatnonzero(table.mask_kind(K.COMM))[0]
    assert table.string(table["coll_op_id"][row]) == "send"
    assert (table["seq"][row], table["src_rank"][row], table["dst_rank"][row]) == (5, 0, 4)
    assert table.string(table["pg_desc_id"][row]) == "PIPELINE_MODEL_PARALLEL_GROUP"
    assert table.string(table["pg_ranks_id"][row]) == "[0, 4]"


def test_kernel_without_args_takes_record_param_comms_metadata(tmp_path):
    rpc = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "record_param_comms",
        "pid": 1,
        "tid": 1,
        "ts": 105,
        "dur": 20,
        "args": {
            "Collective name": "allreduce",
            "In msg nelems": 100,
            "Out msg nelems": 100,
            "dtype": "Half",
            "Process Group Name": "0",
            "Process Group Description": "DATA_PARALLEL_GROUP",
        },
    }
    k = kernel("ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", 150, 10)
    table, _ = load(write(tmp_path, trace([STEP, rpc, LAUNCH, k], distributedInfo={"rank": 0, "world_size": 2})))
    row = np.flatnonzero(table.mask_kind(K.COMM))[0]
    assert table.string(table["coll_op_id"][row]) == "all_reduce"
    assert table.string(table["pg_desc_id"][row]) == "DATA_PARALLEL_GROUP"
    assert table["in_bytes"][row] == 200


def test_flow_category_int_and_float_timestamps_and_base_time(tmp_path):
    flows = [
        {"ph": "s", "cat": "async_cpu_to_gpu", "id": 42, "pid": 1, "tid": 1, "ts": 110},
        {"ph": "f", "cat": "async_cpu_to_gpu", "id": 42, "pid": 0, "tid": 7, "ts": 150, "bp": "e"},
    ]
    k = kernel("volta_sgemm_128x64_nn", 150.5, 10.25)
    doc = trace([STEP, LAUNCH, k] + flows, baseTimeNanoseconds=1_700_000_000_000_000_000)
    table, info = load(write(tmp_path, doc, gz=True))
    row = np.flatnonzero(table.mask_kind(K.KERNEL))[0]
    assert table["ts_ns"][row] == 1_700_000_000_000_000_000 + 150_500
    assert table["dur_ns"][row] == 10_250
    assert info.generation["flow_category"] == "async_cpu_to_gpu"
    assert info.generation["base_time"] == "present" and info.generation["timestamps"] == "float"


@pytest.mark.parametrize(
    "name,kind",
    [
        ("ncclSymkDevKernel_AllGather_LL(ncclSymkDevWorkArgs4K)", K.COMM),
        ("kuserbuffers_pushrecv", K.COMM),
        ("void deep_ep::intranode::dispatch<8, 768>(int4*)", K.COMM),
        ("void nvshmemi_transfer_kernel(int)", K.COMM),
        ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<...> >(int, ...)", K.KERNEL),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", K.KERNEL),
    ],
)
def test_rule_table_classifies_comm_libraries(tmp_path, name, kind):
    table, _ = load(write(tmp_path, trace([STEP, LAUNCH, kernel(name, 150, 10)])))
    assert table["kind"][table["device"] >= 0].tolist() == [int(kind)]


def test_user_pattern_extends_rules(tmp_path):
    from tracekit.loader.classify import RuleSet

    path = write(tmp_path, trace([STEP, LAUNCH, kernel("my_custom_allgather_kernel", 150, 10)]))
    table, _ = load_file(path, LoadOptions(cache=False, rules=RuleSet().with_patterns(["^my_custom_"])))
    assert table["kind"][table["device"] >= 0].tolist() == [int(K.COMM)]
    assert table.string(table["coll_op_id"][table["device"] >= 0][0]) == "all_gather"


def test_cpu_only_gloo_generation(tmp_path):
    """deviceProperties: [], gloo spans on pt_gloo_runloop threads, tracekit annotations carrying metadata."""
    from tracekit.formats.comm_annotation import CommAnnotation

    ann = CommAnnotation(
        op="all_gather",
        pg_name="1",
        pg_desc="tracekit:sp",
        ranks="0,1",
        dtype="bfloat16",
        in_nelems=64,
        out_nelems=128,
        in_bytes=128,
        out_bytes=256,
        seq=3,
    )
    wait = CommAnnotation(op="all_gather", pg_name="1", seq=3, is_wait=True)
    events = [
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 9, "args": {"name": "thread 9 (pt_gloo_runloop)"}},
        dict(STEP, pid=5, tid=5),
        {"ph": "X", "cat": "user_annotation", "name": ann.format(), "pid": 5, "tid": 5, "ts": 110, "dur": 4},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::_allgather_base_", "pid": 5, "tid": 5, "ts": 111, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 5, "ts": 120, "dur": 30},
        {"ph": "X", "cat": "user_annotation", "name": wait.format(), "pid": 5, "tid": 5, "ts": 150, "dur": 20},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_gather", "pid": 5, "tid": 9, "ts": 115, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 5, "tid": 9, "ts": 120, "dur": 10},
    ]
    table, info = load(
        write(tmp_path, trace(events, deviceProperties=[], distributedInfo={"backend": "gloo", "rank": 0, "world_size": 2}))
    )
    assert info.device_type == "cpu"
    names = table.decode("name_id")
    kinds = dict(zip(names, table["kind"].tolist()))
    assert kinds["gloo:all_gather"] == K.COMM and kinds["aten::copy_"] == K.CPU_COMM_OP
    assert kinds["aten::mm"] == K.CPU_OP and kinds[wait.format()] == K.SYNC
    assert kinds["c10d::_allgather_base_"] == K.CPU_COMM_OP
    span = np.flatnonzero(names == "gloo:all_gather")[0]
    assert table.string(table["pg_desc_id"][span]) == "tracekit:sp"
    assert (table["seq"][span], table["out_bytes"][span], table["step"][span]) == (3, 256, 7)


def test_gloo_spans_follow_their_group_threads_when_ops_are_ambiguous(tmp_path):
    """gloo runs an sp reduce-scatter as gloo:all_reduce; with a dp all-reduce pending at the same time the
    span must still go to the sp annotation: its thread serves sp, as a later span only sp can explain shows."""
    from tracekit.formats.comm_annotation import CommAnnotation

    def issue(op, pg, desc, seq, ts):
        a = CommAnnotation(op=op, pg_name=pg, pg_desc=desc, ranks="0,1", dtype="float32", in_nelems=8, out_nelems=8, seq=seq)
        return {"ph": "X", "cat": "user_annotation", "name": a.format(), "pid": 5, "tid": 5, "ts": ts, "dur": 2}

    def span(op, tid, ts, dur=10):
        return {"ph": "X", "cat": "user_annotation", "name": f"gloo:{op}", "pid": 5, "tid": tid, "ts": ts, "dur": dur}

    events = [
        dict(STEP, pid=5, tid=5, ts=0, dur=1000),
        issue("all_reduce", "2", "tracekit:dp", 0, 5),
        span("all_reduce", 31, 10),  # only dp pending: thread 31
        issue("all_reduce", "2", "tracekit:dp", 1, 100),
        issue("reduce_scatter", "1", "tracekit:sp", 0, 110),
        span("all_reduce", 21, 115),
        span("all_reduce", 31, 130),  # 115: dp or sp? thread 21 is sp's ...
        issue("all_gather", "1", "tracekit:sp", 1, 200),
        span("all_gather", 21, 210),
    ]  # ... as only sp explains
    table, _ = load(write(tmp_path, trace(events, distributedInfo={"backend": "gloo", "rank": 0, "world_size": 2})))
    comm = np.flatnonzero(table.mask_kind(K.COMM))
    got = sorted(
        zip(
            table["ts_ns"][comm].tolist(),
            table.decode("coll_op_id")[comm],
            table.decode("pg_desc_id")[comm],
            table["seq"][comm].tolist(),
        )
    )
    assert got == [
        (10_000, "all_reduce", "tracekit:dp", 0),
        (115_000, "reduce_scatter", "tracekit:sp", 0),
        (130_000, "all_reduce", "tracekit:dp", 1),
        (210_000, "all_gather", "tracekit:sp", 1),
    ]
