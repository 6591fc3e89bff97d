"""Real trace shapes the tests/data fixtures do not have, each built from the events its producer writes (field
names, categories and launch names copied from real traces and the producers' sources), with a known answer.

- Intel XPU (Kineto's XPUPTI plugin, PyTorch 2.10 on Aurora): ``cpu_op`` -> ``xpu_runtime``
  ``urEnqueueKernelLaunch`` (args ``correlation``, ``External id``) -> ``kernel`` on pid 0 with ``sycl queue`` /
  ``l0 queue`` instead of ``stream``; Level Zero calls as ``xpu_driver``. Before, the launch categories were
  unknown ("other"): every kernel an orphan, the oneCCL kernel compute, comm 0, platform "cuda".
- The c10d backends other than NCCL name their host collectives ``xccl:all_reduce`` (ProcessGroupXCCL),
  ``ucc:all_reduce``, ``mpi:all_reduce``: the launch context of their kernels. Before, only nccl/rccl/hccl/gloo.
- PrivateUse1 accelerators (``privateuse1_runtime``) and Kineto forks that renamed the CUDA categories (Moore
  Threads' ``musa_runtime``, Cambricon's ``mlu_runtime``).
- Ascend HCCL device tasks ``hcom_allReduce__503_0_1``, ``hcom_receive_``.
"""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tests.helpers.kineto import load, trace, write
from tracekit.cli import cli
from tracekit.loader.classify import RuleSet, normalize_op
from tracekit.loader.kinds import device_pids
from tracekit.model.events import EventKind as K

PID = 732211


def _x(cat, name, ts, dur, pid=PID, tid=PID, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def xpu_trace(runtime="xpu_runtime", driver="xpu_driver", host_coll="xccl:all_reduce", metadata=True):
    """Two steps of 900 us. Per step: a 100 us gemm (100..200) on queue 0 and a 200 us all-reduce kernel
    (150..350) on queue 1: compute 100, comm 200, hidden 50, exposed 150."""
    ev, corr, base = [], 4131, 95786069998.433
    for step in (1, 2):
        s = base + (step - 1) * 1000.0
        ev.append(_x("user_annotation", f"ProfilerStep#{step}", s, 900.0))
        ev.append(_x("cpu_op", "aten::addmm", s + 10, 50.0, **{"External id": corr}))
        ev.append(_x(runtime, "urEnqueueKernelLaunch", s + 20, 5.0, **{"External id": corr, "correlation": corr}))
        ev.append(_x(driver, "zeCommandListAppendLaunchKernel", s + 21, 2.0, **{"correlation": corr + 5000}))
        ev.append(
            _x(
                "kernel",
                "gemm_kernel",
                s + 100,
                100.0,
                pid=0,
                tid=0,
                **{"External id": corr, "correlation": corr, "device": 0, "sycl queue": 64, "l0 queue": "0x000055d08b8fc138"},
            )
        )
        corr += 1
        if metadata:
            ev.append(
                _x(
                    "cpu_op",
                    "record_param_comms",
                    s + 60,
                    30.0,
                    **{
                        "Collective name": "allreduce",
                        "dtype": "Float",
                        "In msg nelems": 1048576,
                        "Out msg nelems": 1048576,
                        "Group size": 2,
                        "Process Group Name": "0",
                        "Process Group Description": "default_pg",
                    },
                )
            )
        ev.append(_x("cpu_op", host_coll, s + 62, 25.0))
        ev.append(_x(runtime, "urEnqueueKernelLaunch", s + 70, 5.0, correlation=corr))
        ev.append(
            _x(
                "kernel",
                "allreduce_kernel<float>",
                s + 150,
                200.0,
                pid=0,
                tid=1,
                correlation=corr,
                device=0,
                **{"sycl queue": 65},
            )
        )
        corr += 1
    return trace(
        ev,
        deviceProperties=[{"id": 0, "name": "Intel(R) Data Center GPU Max 1550"}],
        distributedInfo={"backend": "xccl", "rank": 0, "world_size": 2},
        baseTimeNanoseconds=1790952716000000000,
    )


def _analyze(path):
    res = CliRunner().invoke(cli, ["analyze", path, "--format", "json", "--no-cache"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


EXPECTED = {"compute_us": 100.0, "comm_us": 200.0, "hidden_comm_us": 50.0, "exposed_comm_us": 150.0, "orphan_device_events": 0}


def test_an_xpu_trace_is_read_as_a_cuda_trace_of_the_same_events(tmp_path):
    xpu = _analyze(write(tmp_path, xpu_trace(), "xpu.json"))
    cuda = _analyze(write(tmp_path, xpu_trace("cuda_runtime", "cuda_driver"), "cuda.json"))
    for step in xpu["ranks"][0]["steps"]:
        assert {k: step[k] for k in EXPECTED} == EXPECTED  # the hand-computed answer
    assert xpu["ranks"][0]["steps"] == cuda["ranks"][0]["steps"]  # and the CUDA path's, event for event
    assert xpu["run"]["device_type"] == "xpu" and cuda["run"]["device_type"] == "cuda"
    assert not any("does not know" in w for w in xpu["warnings"])  # before: 'xpu_runtime' x4 counted as other


def test_xpu_launches_give_kernels_their_step(tmp_path):
    table, info = load(write(tmp_path, xpu_trace()))
    kernels = np.flatnonzero(table.mask_kind(K.KERNEL, K.COMM))
    assert sorted(table["step"][kernels].tolist()) == [1, 1, 2, 2]
    assert info.generation["categories"] == "xpu" and info.generation["platform"] == "xpu"
    assert (table["kind"] == K.RUNTIME).sum() == 6  # urEnqueueKernelLaunch x4 + zeCommandList... x2


@pytest.mark.parametrize("host_coll", ["xccl:all_reduce", "ucc:all_reduce", "mpi:all_reduce", "nccl:all_reduce"])
def test_the_launch_context_of_every_c10d_backend_makes_its_kernel_communication(tmp_path, host_coll):
    """No collective args anywhere (no record_param_comms) and a kernel name no rule knows: only the host op
    that launched it says it is a collective. Before, xccl/ucc/mpi kernels were compute (comm 0, compute 300)."""
    out = _analyze(write(tmp_path, xpu_trace(host_coll=host_coll, metadata=False)))
    for step in out["ranks"][0]["steps"]:
        assert {k: step[k] for k in EXPECTED} == EXPECTED


@pytest.mark.parametrize("runtime", ["privateuse1_runtime", "privateuse1_driver", "musa_runtime", "mlu_runtime"])
def test_renamed_runtime_categories_link_their_kernels(tmp_path, runtime):
    out = _analyze(write(tmp_path, xpu_trace(runtime=runtime, driver=runtime)))
    for step in out["ranks"][0]["steps"]:
        assert {k: step[k] for k in EXPECTED} == EXPECTED
    assert not any("does not know" in w for w in out["warnings"])


def test_a_pid_with_host_launch_calls_is_no_device():
    cats = ["kernel", "xpu_runtime", "privateuse1_runtime", "cpu_op"]
    pid = np.array([0, 0, 5, 5, 9, 9])
    cat = np.array([0, 1, 0, 2, 0, 3])
    assert device_pids(pid, cat, cats).tolist() == []  # each pid holds a host category
    assert device_pids(np.array([0, 7]), np.array([0, 1]), cats).tolist() == [0]


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("hcom_allReduce__503_0_1", "all_reduce"),
        ("hcom_allGather__410_2_1", "all_gather"),
        ("hcom_reduceScatter__77_0_1", "reduce_scatter"),
        ("hcom_alltoallv__12_0_1", "all_to_all"),
        ("hcom_broadcast__3_0_1", "broadcast"),
        ("hcom_send__9_0_1", "send"),
        ("hcom_receive__9_0_1", "recv"),
    ],
)
def test_hccl_device_tasks_are_communication_with_their_op(name, op):
    rule = RuleSet().match([name])[0]
    assert rule is not None and rule.library == "hccl"
    assert normalize_op(name) == op


def test_names_that_only_contain_hcom_are_not_communication():
    assert RuleSet().match(["my_hcom_kernel", "aclnnHcomLike"]) == [None, None]


def _op18(name, tid, ts, dur, **args):
    return {
        "ph": "X",
        "cat": "Operator",
        "name": name,
        "pid": 13721,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"Input Dims": [], **args},
    }


def _dev18(cat, name, ts, dur, corr, **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": "stream 7",
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "external id": 4, **args},
    }


def _rt18(name, ts, dur, corr, tid="456"):
    return {
        "ph": "X",
        "cat": "Runtime",
        "name": name,
        "pid": 13721,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "external id": 4},
    }


# PyTorch 1.8's shape (torch-tb-profiler's test_all_categories, pytorch/kineto tb_plugin/test/test_profiler.py):
# host events in "Operator" (ProfilerStep#1 too), string tids ("123", "456", "stream 7"). tb_profiler's answer
# for step 1: kernel 15 us, memcpy 10, memset 5.
PT18 = [
    _op18("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "123", 100, 180),
    _op18("aten::to", "123", 200, 60),
    _op18("aten::nll_loss_backward", "456", 340, 70),
    _op18("ProfilerStep#1", "123", 50, 400),
    _dev18("Memcpy", "Memcpy HtoD (Pageable -> Device)", 405, 10, 334, stream=7),
    _rt18("cudaMemcpyAsync", 360, 20, 334),
    _dev18("Memset", "Memset (Device)", 420, 5, 40344, stream=7),
    _rt18("cudaMemsetAsync", 390, 10, 40344),
    _dev18("Kernel", "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", 430, 15, 40348, device=0),
    _rt18("cudaLaunchKernel", 405, 5, 40348),
]


def test_pytorch_1_8_operators_steps_and_string_tids(tmp_path):
    """Before: 'Operator' unknown (no step found, 0 host ops, a warning), every string tid -1 (stream -1)."""
    path = write(tmp_path, trace(PT18))
    step = _analyze(path)["ranks"][0]["steps"]
    assert [(s["step"], s["compute_us"], s["memcpy_us"], s["memset_us"]) for s in step] == [(1, 15.0, 10.0, 5.0)]
    table, info = load(path)
    assert info.generation["categories"] == "kineto-1.8"
    names = table.decode("name_id")
    stream = dict(zip(names, table["stream"].tolist()))
    assert stream["void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"] == 7
    assert (stream["aten::to"], stream["aten::nll_loss_backward"]) == (123, 456)
    assert (table["kind"] == K.CPU_OP).sum() == 3 and (table["kind"] == K.STEP).sum() == 1


def test_string_tids_keep_host_threads_apart_for_the_launch_context(tmp_path):
    """The collective's launch on thread "456" lies inside an aten::copy_ of thread "123". With the threads read
    apart, the innermost host op around the launch is c10d::allreduce_, so the kernel is communication; before,
    both threads read as -1 and the other thread's aten::copy_ made it compute."""
    evs = [
        _op18("ProfilerStep#1", "123", 50, 400),
        _op18("aten::copy_", "123", 303, 7),
        _op18("c10d::allreduce_", "456", 300, 20),
        _rt18("cudaLaunchKernel", 305, 2, 9),
        _dev18("Kernel", "some_fused_allreduce_kernel", 330, 40, 9, device=0),
    ]
    table, _ = load(write(tmp_path, trace(evs)))
    assert table["kind"][table.decode("name_id").tolist().index("some_fused_allreduce_kernel")] == K.COMM


@pytest.mark.parametrize(
    ("tid", "value"),
    [
        ("stream 7", 7),
        ("456", 456),
        (" 12 ", 12),
        ("Thread 1", -1),
        ("stream x", -1),
        (7, 7),
        (2**63, -1),
        (None, -1),
        ("9" * 30, -1),
    ],
)
def test_thread_ids(tid, value):
    from tracekit.loader.kinds import thread_ids

    assert thread_ids([tid, 3]).tolist() == [value, 3]


# A JAX/XLA trace-viewer export (TensorBoard's profile plugin): no "cat", lanes named by process_name metadata.
JAX = {
    "displayTimeUnit": "ns",
    "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
        {"ph": "X", "pid": 1, "tid": 1, "name": "fusion.1", "ts": 100.5, "dur": 20.25},
        {"ph": "X", "pid": 1, "tid": 1, "name": "all-reduce.3", "ts": 130.0, "dur": 40.0},
        {"ph": "X", "pid": 701, "tid": 5, "name": "PjitFunction(train_step)", "ts": 90.0, "dur": 100.0},
    ],
}


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["analyze", "--format", "json"],
        ["report", "-o", "{tmp}/r.html"],
        ["annotate", "-o", "{tmp}/a.json"],
        ["check", "--budget", "exposed_comm_share<=1"],
    ],
)
def test_a_chrome_trace_without_kineto_categories_is_refused(tmp_path, command):
    """Before: every figure 0, a warning, and `check --budget` PASSED on a trace nothing of which was read."""
    path = write(tmp_path, JAX)
    args = [a.format(tmp=tmp_path) for a in command]
    res = CliRunner().invoke(cli, [*args, path, "--no-cache"])
    assert res.exit_code == 3, res.output
    assert "not a PyTorch profiler (Kineto) trace" in res.output and "cat: none ×3" in res.output
    assert "Traceback" not in res.output


def test_one_kineto_category_is_enough(tmp_path):
    """A Kineto trace with a few catless events merged in still loads (only a trace with none is refused)."""
    doc = {"traceEvents": JAX["traceEvents"] + [_x("cpu_op", "aten::mm", 95.0, 10.0)]}
    table, info = load(write(tmp_path, doc))
    assert len(table) == 4 and info.generation["categories"] == "kineto"


def test_a_bare_event_array_is_one_line(tmp_path):
    """torch_npu's trace_view.json: a JSON array, string ts, device lanes only by process_name."""
    evs = [
        {"ph": "M", "name": "process_name", "pid": 4, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "X", "name": "MatMulV2", "ts": "1699529623106750", "dur": 100, "tid": 3, "pid": 4, "args": {}},
    ]
    res = CliRunner().invoke(cli, ["analyze", write(tmp_path, evs), "--no-cache"])
    assert res.exit_code == 3 and "JSON without a 'traceEvents' list" in res.output


PT18_REAL = str(
    __import__("pathlib").Path(__file__).resolve().parents[2] / "data" / "kineto-tb-plugin" / "pt18-v100-excerpt.json.gz"
)


def test_a_real_pytorch_1_8_trace_excerpt():
    """tests/data/kineto-tb-plugin (verbatim events of a PyTorch 1.8 V100 trace). Before: no step (ProfilerStep#2
    was an unknown 'Operator'), the whole trace one window (step -1), the flows' category 'none', no device
    properties (1.8 calls them computeProperties)."""
    out = _analyze(PT18_REAL)
    (step,) = out["ranks"][0]["steps"]
    assert (step["step"], step["compute_us"], step["memcpy_us"], step["host_wall_us"]) == (2, 13.0, 1.0, 13410.0)
    table, info = load(PT18_REAL)
    kernels = table.mask_kind(K.KERNEL)
    assert kernels.sum() == 5 and set(table["step"][kernels].tolist()) == {2}
    assert set(table["stream"][kernels].tolist()) == {7}
    host = table.mask_kind(K.CPU_OP)
    assert set(table["stream"][host].tolist()) == {24572, 24610}  # the autograd thread apart from the main one
    assert info.generation["flow_category"] == "async" and info.generation["categories"] == "kineto-1.8"
    assert [p["name"] for p in info.device_properties] == ["Tesla V100-DGXS-32GB"]  # from 1.8's computeProperties


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["analyze", "--critical-path"],
        ["report", "-o", "{tmp}/r.html"],
        ["annotate", "-o", "{tmp}/a.json"],
        ["check", "--budget", "exposed_comm_share<=1"],
    ],
)
def test_every_command_reads_the_new_shapes(tmp_path, command):
    args = [a.format(tmp=tmp_path) for a in command]
    for path in (PT18_REAL, write(tmp_path, xpu_trace(), "xpu.json")):
        res = CliRunner().invoke(cli, [*args, path, "--no-cache"])
        assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "all_reduce"),  # NCCL 2.4-2.8 (PyTorch 1.x, Paddle)
        ("ncclReduceRingLLKernel_sum_f32(ncclColl)", "reduce"),
        ("ncclBroadcastRingLLKernel_copy_i8(ncclColl)", "broadcast"),
        ("ncclAllGatherRingLLKernel_copy_i8(ncclColl)", "all_gather"),
        ("ncclReduceScatterRingLLKernel_sum_f16(ncclColl)", "reduce_scatter"),
        ("ncclSendRecvKernel_copy_i8(ncclWorkElem)", "send_recv"),
        ("ncclKernel_Reduce_RING_LL_Sum_float(ncclWorkElem)", "reduce"),  # 2.9-2.18: before, op ""
        ("ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "reduce"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "all_reduce"),
    ],
)
def test_every_nccl_kernel_generation_is_communication_with_its_op(name, op):
    """Before: NCCL <= 2.8's kernel names matched no rule (compute, unless the launch context said otherwise),
    and a Reduce kernel after the "ncclKernel_" prefix had no op."""
    rule = RuleSet().match([name])[0]
    assert rule is not None and rule.library == "nccl"
    assert normalize_op(name) == op


def test_nccl_prefixed_host_ops_and_compute_kernels_are_untouched():
    assert normalize_op("nccl:reduce") == "reduce" and normalize_op("nccl:all_reduce") == "all_reduce"
    assert RuleSet().match(["ncclUnrelatedHelper", "void at::native::reduce_kernel<512, 1>"]) == [None, None]


def test_a_kineto_trace_that_recorded_nothing_is_still_the_empty_window_error(tmp_path):
    """Only Kineto's own "Trace" span: a Kineto trace with no activity, not a foreign one."""
    doc = {
        "traceEvents": [
            {
                "ph": "X",
                "cat": "Trace",
                "ts": 1,
                "dur": 5,
                "pid": "Traces",
                "tid": "PyTorch Profiler",
                "name": "PyTorch Profiler (0)",
                "args": {"Op count": 0},
            }
        ]
    }
    res = CliRunner().invoke(cli, ["analyze", write(tmp_path, doc), "--no-cache"])
    assert res.exit_code == 3 and "no step and no events" in res.output
    assert "not a PyTorch profiler" not in res.output
