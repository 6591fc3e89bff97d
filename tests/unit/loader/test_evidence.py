"""Event kinds and communication from evidence (issue #19): hand-built traces of each case with a known answer,
and the name rules against kernel names from the libraries' public sources."""

import numpy as np
import pytest

import tracekit
from tests.helpers.kineto import LAUNCH, STEP, kernel, load, trace, write
from tracekit.loader.classify import RuleSet
from tracekit.loader.loading import LoadOptions
from tracekit.model.events import EventKind as K

# Kernel names as CUPTI reports them, built from the libraries' sources: the namespaces and __global__ function
# names are the sources' (DeepEP csrc/kernels/api.cuh, intranode.cu, internode.cu, internode_ll.cu; NCCL
# src/device/symmetric/gen_files/*.cu and the fixture traces; NVSHMEM h_to_d_coll_defs.h); template arguments
# and parameter lists are abbreviated.
DEEPEP = [
    "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, int, int, bool const*, int*)",
    "void deep_ep::intranode::cached_notify_dispatch<8>(int const*, int, void**, int**, int)",
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, int4 const*)",
    "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int, int, int**, int)",
    "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*, __nv_bfloat16 const*)",
    "void deep_ep::intranode::barrier<8>(int**, int)",
    "void deep_ep::internode::notify_dispatch<false, 8>(int const*, int*, int, int const*, int*, int const*)",
    "void deep_ep::internode::dispatch<false, 2, 8, 16, 32>(int4*, float*, long*, float*, void*, int4 const*)",
    "void deep_ep::internode::cached_notify(int, int, int, int, int, int, int, int*, int const*, int const*)",
    "void deep_ep::internode::combine<__nv_bfloat16, 2, 8, 16, 32>(int4*, float*, bool const*, int4 const*)",
    "void deep_ep::internode_ll::clean_low_latency_buffer<32>(int*, int, int*, int)",
    "void deep_ep::internode_ll::dispatch<false, 7168>(void*, float*, int*, long*, int*, void*, int*, void*)",
    "void deep_ep::internode_ll::combine<7168, 9>(void*, void*, int*, void*, void const*, long const*)",
    # a fork that renamed the namespace
    "void dpsk::ep::internode::cached_notify(int, int, int, int, int, int, int, int*, int const*, int const*)",
    "void dpsk::ep::internode_ll::clean_low_latency_buffer<32>(int*, int, int*, int)",
    "void dpsk::ep::intranode::cached_notify_dispatch<8>(int const*, int, void**, int**, int)",
]
NCCL = [
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8(ncclWorkElem)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
    "ncclSymkDevKernel_ReduceScatter_LL_sum_bf16(ncclSymkDevWorkArgs4K)",
    "ncclSymkDevKernel_ReduceScatter_LDMC_sum_f32(ncclSymkDevWorkArgs4K)",
]
NVSHMEM = [
    "barrier_on_stream_kernel_warp(int, int, int, long*, long*)",
    "void barrier_on_stream_kernel_threadgroup<(threadgroup_t)2>(int, int)",
    "sync_all_on_stream_kernel_block()",
    "void fcollect_on_stream_kernel<float>(int, float*, float const*, unsigned long)",
    "void alltoall_on_stream_kernel<__nv_bfloat16>(int, __nv_bfloat16*, __nv_bfloat16 const*, unsigned long)",
    "void rdxn_on_stream_kernel<float, (rdxn_ops)4>(int, float*, float const*, unsigned long)",
    "void nvshmemi_transfer_kernel(int)",
]
COMPUTE = [
    "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add<float> > >",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
    "void dispatch_kernel_for_my_model(float*)",  # a kernel merely named "dispatch" is not DeepEP's
]


@pytest.mark.parametrize(
    "name,library",
    [(n, "deepep") for n in DEEPEP]
    + [(n, "nccl") for n in NCCL]
    + [(n, "nvshmem") for n in NVSHMEM]
    + [(n, None) for n in COMPUTE],
)
def test_name_rules_cover_each_library_family(name, library):
    (rule,) = RuleSet().match([name])
    assert (rule.library if rule is not None else None) == library


def host(name, ts, dur, cat="cpu_op", tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def launch(ts, corr, name="cudaLaunchKernel"):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 2, "args": {"correlation": corr}}


def memcpy(ts, dur, corr):
    return {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": "Memcpy DtoD (Device -> Device)",
        "pid": 0,
        "tid": 20,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "stream": 20, "device": 0, "bytes": 4096},
    }


def test_launch_context_memcpy_inside_a_collective_is_communication(tmp_path):
    """NCCL's copy-engine collectives run as a Memcpy with no kernel; a copy an operator nested in the
    collective launches (aten::copy_ out of the flat buffer) is that operator's own work."""
    rpc = host(
        "record_param_comms",
        105,
        10,
        **{
            "Collective name": "_allgather_base",
            "In msg nelems": 512,
            "Out msg nelems": 1024,
            "dtype": "Float",
            "Process Group Name": "3",
        },
    )
    events = [
        STEP,
        host("c10d::_allgather_base_", 104, 40),
        rpc,
        launch(106, 1, "cudaMemcpyAsync"),
        host("aten::copy_", 120, 10),
        launch(121, 2),
        memcpy(150, 20, 1),
        kernel("void at::native::elementwise_kernel<128, 4>(int)", 180, 5, corr=2),
    ]
    table, _ = load(write(tmp_path, trace(events, distributedInfo={"rank": 0, "world_size": 2})))
    dev = np.flatnonzero(table["device"] >= 0)
    assert table["kind"][dev].tolist() == [int(K.COMM), int(K.KERNEL)]
    row = dev[0]
    assert table.string(table["coll_op_id"][row]) == "all_gather" and table.string(table["pg_name_id"][row]) == "3"
    assert (table["in_bytes"][row], table["out_bytes"][row]) == (2048, 4096)


def test_old_trace_op_and_size_from_the_launching_host_op_on_the_world_group(tmp_path):
    """Before 2024: no pg_config, kernels without collective args; the host op carries the type and size."""
    events = [
        STEP,
        host("nccl:all_reduce", 104, 10, cat="user_annotation", **{"Input Dims": [[1024, 1024]], "Input type": ["float"]}),
        launch(106, 1),
        host(
            "c10d::alltoall_base_",
            120,
            10,
            **{"Input Dims": [[64, 32], [64, 32], [], []], "Input type": ["c10::BFloat16", "c10::BFloat16", "", ""]},
        ),
        host("nccl:all_to_all", 121, 8, cat="user_annotation"),
        launch(122, 2),
        kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 150, 10, corr=1),
        kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8(ncclWorkElem)", 170, 10, corr=2),
    ]
    table, info = load(write(tmp_path, trace(events, distributedInfo={"backend": "nccl", "rank": 0, "world_size": 2})))
    ar, a2a = np.flatnonzero(table.mask_kind(K.COMM))
    assert table.string(table["coll_op_id"][ar]) == "all_reduce"
    assert (table["in_nelems"][ar], table["in_bytes"][ar]) == (1024 * 1024, 4 * 1024 * 1024)
    assert table.string(table["coll_op_id"][a2a]) == "all_to_all"  # a SendRecv kernel an all-to-all launched
    assert table.string(table["pg_name_id"][ar]) == table.string(table["pg_name_id"][a2a]) == "0"
    (w,) = info.warnings
    assert "names no process groups" in w and "2 collectives" in w and "world group" in w


def test_old_traces_match_across_ranks_by_order_on_the_world_group(tmp_path):
    def rank_trace(rank, offset):
        ev = [dict(STEP, ts=100 + offset)]
        for i in range(3):
            t = 104 + 40 * i + offset
            ev += [
                host("c10d::allreduce_", t, 10),
                launch(t + 2, i + 1),
                kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", t + 10, 8 + rank, corr=i + 1),
            ]
        return trace(ev, distributedInfo={"backend": "nccl", "rank": rank, "world_size": 2})

    paths = [write(tmp_path, rank_trace(r, 3 * r), name=f"r{r}.json") for r in (0, 1)]
    summary = tracekit.analyze(tracekit.load(paths, options=LoadOptions(cache=False), executor="serial"))
    cross = summary.comm.cross
    assert cross.matched == 3
    assert sorted(set(cross.instances.columns["match_id"].tolist())) == [0, 1, 2]


def test_host_annotations_on_a_device_run_are_never_device_communication(tmp_path):
    """MTIA's hccl:*/gloo:* annotations sit on the host thread: before, they became COMM, their thread's
    operators became collective ops, and compute was 0."""
    events = [
        STEP,
        host("hccl:allgather", 104, 30, cat="user_annotation"),
        host("gloo:barrier", 140, 10, cat="user_annotation"),
        host("aten::mm", 106, 5),
        {"ph": "X", "cat": "mtia_ccp_events", "name": "fc-dtype_Float", "pid": 9, "tid": 4, "ts": 150, "dur": 20, "args": {}},
        {
            "ph": "X",
            "cat": "mtia_ccp_events",
            "name": "dma_request",
            "pid": 9,
            "tid": 4,
            "ts": 175,
            "dur": 5,
            "args": {"direction": "HOST_TO_DEVICE", "size": 64},
        },
        {
            "ph": "X",
            "cat": "mtia_runtime",
            "name": "synchronize",
            "pid": 9,
            "tid": 5,
            "ts": 180,
            "dur": 1,
            "args": {"correlation": 7, "device": 9},
        },
        {
            "ph": "X",
            "cat": "mtia_runtime",
            "name": "runFunction - job_prep_and_submit_for_execution",
            "pid": 1,
            "tid": 1,
            "ts": 112,
            "dur": 2,
            "args": {"correlation": 8},
        },
    ]
    table, info = load(
        write(tmp_path, trace(events, distributedInfo={"backend": "mtia:hccl,cpu:gloo", "rank": 0, "world_size": 1}))
    )
    kinds = dict(zip(table.decode("name_id"), table["kind"].tolist()))
    assert kinds["hccl:allgather"] == kinds["gloo:barrier"] == K.CPU_COMM_OP
    assert kinds["aten::mm"] == K.CPU_OP and kinds["fc-dtype_Float"] == K.KERNEL
    assert kinds["dma_request"] == K.MEMCPY and kinds["synchronize"] == K.SYNC  # a runtime record on the device pid
    assert kinds["runFunction - job_prep_and_submit_for_execution"] == K.RUNTIME
    assert not table.mask_kind(K.COMM).any()
    assert (info.device_type, info.generation["categories"]) == ("mtia", "mtia")


def test_pytorch_1_8_categories(tmp_path):
    """Kernel / Memcpy / Memset / Runtime and async_gpu flows: device work, launched from a step."""
    dev = {"pid": 0, "tid": 7, "args": {"stream": 7, "device": 0, "correlation": 5}}
    events = [
        STEP,
        dict(launch(110, 5), cat="Runtime"),
        {"ph": "X", "cat": "Kernel", "name": "volta_sgemm_128x64_nn", "ts": 150, "dur": 10, **dev},
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "ts": 170,
            "dur": 4,
            **dict(dev, args={"stream": 7, "device": 0, "correlation": 6, "bytes": 64}),
        },
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "ts": 180, "dur": 1, **dev},
        {"ph": "s", "cat": "async_gpu", "id": 5, "pid": 1, "tid": 1, "ts": 110},
        {"ph": "f", "cat": "async_gpu", "id": 5, "pid": 0, "tid": 7, "ts": 150, "bp": "e"},
    ]
    table, info = load(write(tmp_path, trace(events, distributedInfo={"rank": 1})))
    rows = np.flatnonzero(table["device"] >= 0)
    assert table["kind"][rows].tolist() == [int(K.KERNEL), int(K.MEMCPY), int(K.MEMSET)]
    assert table["mem_bytes"][rows[1]] == 64 and table["step"][rows[0]] == 7
    assert (info.device_type, info.generation["categories"]) == ("cuda", "kineto-1.8")


def test_no_distributed_info_is_rank_0_of_1_everywhere(tmp_path):
    path = write(tmp_path, trace([STEP, LAUNCH, kernel("volta_sgemm_128x64_nn", 150, 10)]))
    _, info = load(path)
    assert (info.rank, info.world_size, info.generation["rank"]) == (0, 1, "absent")
    summary = tracekit.analyze(tracekit.load(path, options=LoadOptions(cache=False), executor="serial"))
    d = summary.to_dict()
    assert d["run"]["ranks"] == [0] and d["ranks"][0]["rank"] == 0
    assert summary.timeline() is not None
