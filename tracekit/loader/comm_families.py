"""The communication-kernel families tracekit ships, read from each library's public sources (data, not code).

One row per family of kernel names: the library, an RE2 pattern searched in the demangled kernel name, the op it
carries ("" = read from the name by ``classify.normalize_op``) and where the names come from. The first row that
matches wins, so a more specific row stands before a general one (PyTorch's reduce-scatter, which runs
``two_shot_all_reduce_kernel<T, a, n, true, …>``, before its all-reduce). Names are anchored on a namespace or a
word boundary, never a bare substring: ``dispatch`` alone is a MoE router's too, ``reduce`` an ATen reduction's.
Local compute beside a library's communication stays compute: DeepEP's ``layout::get_dispatch_layout`` and the
copy epilogues of its V2 kernels, TensorRT-LLM's ``rmsNormLamport``.

Name rules are the last evidence: collective metadata on the kernel or its ``record_param_comms``, and the launch
context (a kernel launched from inside a collective host op, ``linking.comm_from_launch_context``) come first.
"""

from __future__ import annotations

# (library, pattern, op, source)
_DEEPEP_NS = r"(^|[\s:])(intranode|internode|internode_ll)::"  # deep_ep::, or a renamed fork's (dpsk::ep::)
FAMILIES: tuple[tuple[str, str, str, str], ...] = (
    # NVIDIA NCCL (RCCL keeps these names): src/device/generate.py, src/device/symmetric/generate.py
    ("nccl", r"^(void )?ncclKernel_", "", "NCCL <= 2.18: ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<type>"),
    ("nccl", r"^(void )?nccl[A-Z][A-Za-z]*Kernel_", "", "NCCL <= 2.8: ncclAllReduceRingLLKernel_sum_f32"),
    ("nccl", r"^(void )?ncclDevKernel", "", "NCCL 2.19+: ncclDevKernel_<Coll>_<Op>_<type>_<ALGO>_<PROTO> (NVLS, "
     "CollNet, Generic, SendRecv)"),
    ("nccl", r"^(void )?ncclSymk?DevKernel_", "", "NCCL 2.27+ symmetric: ncclSymkDevKernel_<Coll>_<algo>[_<op>_<type>]"),
    ("rccl", r"(?i)^(void )?rccl", "", "ROCm RCCL's own kernels"),
    ("hccl", r"(?i)^hccl", "", "Ascend HCCL"),
    ("hccl", r"^hcom_", "", "Ascend HCCL device tasks: hcom_allReduce__503_0_1, hcom_receive_"),
    ("te-userbuffers", r"^kuserbuffers_|userbuffers", "", "Transformer Engine comm-GEMM overlap (userbuffers.cu)"),
    # DeepEP: csrc/kernels/intranode.cu, internode.cu, internode_ll.cu, runtime.cu; V2 csrc/kernels/elastic/*.hpp
    ("deepep", _DEEPEP_NS + r"(cached_)?notify(_dispatch|_combine)?\b", "notify", "DeepEP notify_dispatch, "
     "cached_notify_dispatch, cached_notify_combine, cached_notify (internode), notify_combine"),
    ("deepep", _DEEPEP_NS + r"(clean_low_latency_buffer|barrier)\b", "notify", "DeepEP clean_low_latency_buffer, "
     "intranode::barrier<kNumRanks>"),
    ("deepep", _DEEPEP_NS + r"dispatch\b", "dispatch", "DeepEP intranode/internode/internode_ll::dispatch"),
    ("deepep", _DEEPEP_NS + r"combine\b", "combine", "DeepEP intranode/internode/internode_ll::combine"),
    ("deepep", r"deep_ep::elastic::(hybrid_)?dispatch_impl\b", "dispatch", "DeepEP V2 (hybrid_)dispatch_impl"),
    ("deepep", r"deep_ep::elastic::(hybrid_)?combine_impl\b", "combine", "DeepEP V2 (hybrid_)combine_impl"),
    ("deepep", r"deep_ep::elastic::barrier_impl\b", "notify", "DeepEP V2 barrier_impl"),
    ("deepep", r"deep_ep::elastic::pp_send_impl\b", "send", "DeepEP V2 pipeline pp_send_impl"),
    ("deepep", r"deep_ep::elastic::pp_recv_impl\b", "recv", "DeepEP V2 pipeline pp_recv_impl"),
    # AMD mori (ROCm/mori src/ops/dispatch_combine): expert-parallel dispatch / combine
    ("mori", r"\bmori::moe::Ep\w*Dispatch\w*Kernel", "dispatch", "mori EpDispatchIntraNodeKernel, EpDispatchInterNodeKernel"),
    ("mori", r"\bmori::moe::Ep\w*Combine\w*Kernel", "combine", "mori EpCombineIntraNodeKernel, EpCombineInterNodeKernel"),
    # PyTorch symmetric memory: torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu, CUDASymmetricMemory.cu
    ("torch-symm-mem", r"\btwo_shot_all_reduce_kernel<[^,<>]+(<[^<>]*>)?, -?\d+, -?\d+, true\b", "reduce_scatter",
     "symm_mem::reduce_scatter_out runs two_shot_all_reduce_kernel<T, alignment, world, reduce_scatter=true, …>"),
    ("torch-symm-mem", r"\bmulti_?mem_\w*all_?gather\w*_kernel\b", "all_gather", "multimem_all_gather_kernel"),
    ("torch-symm-mem", r"\bmulti_?mem_\w*all_?reduce\w*_kernel\b", "all_reduce", "multimem_all_reduce_kernel, "
     "multimem_one_shot_all_reduce_kernel"),
    ("torch-symm-mem", r"\bmultimem_one_shot_reduce_kernel\b", "reduce", "multimem_one_shot_reduce_kernel"),
    ("torch-symm-mem", r"\b(one|two)_shot_all_reduce_kernel", "all_reduce", "one_shot_all_reduce_kernel, "
     "two_shot_all_reduce_kernel(_inplace)"),
    ("torch-symm-mem", r"c10d::symmetric_memory::(multimem_)?barrier_kernel\b", "barrier", "CUDASymmetricMemory::barrier"),
    ("torch-symm-mem", r"c10d::symmetric_memory::(put|wait)_signal_kernel\b", "notify", "put_signal / wait_signal"),
    ("torch-symm-mem", r"\bhybridCubeMeshAllReduceKernel\b", "all_reduce", "IntraNodeComm (PyTorch 2.2-2.4)"),
    # vLLM csrc/custom_all_reduce.cuh, SGLang sgl-kernel csrc/allreduce/custom_all_reduce.cuh, ROCm aiter
    ("custom-allreduce", r"\bcross_device_reduce_(1stage|2stage|half_butterfly)\w*", "all_reduce",
     "vllm:: / sglang:: / aiter:: cross_device_reduce_1stage, cross_device_reduce_2stage"),
    # AMD QuickReduce (vLLM csrc/quickreduce/quick_reduce.h, aiter, SGLang)
    ("quickreduce", r"\bquickreduce::allreduce_prototype_\w+", "all_reduce", "quickreduce::allreduce_prototype_twoshot"),
    # TensorRT-LLM kernels/customAllReduceKernels.cu, communicationKernels/allReduceFusionKernels.cu,
    # moeAllReduceFusionKernels.cu, mnnvlTwoShotAllreduceKernels.cu; FlashInfer include/flashinfer/comm/trtllm_*.cuh
    ("trtllm-allreduce", r"\b(moereduce_|moefinalize_)?allreduce_fusion_kernel_\w+", "all_reduce",
     "allreduce_fusion_kernel_oneshot_lamport, _twoshot_sync, _twoshot_direct, moefinalize_/moereduce_ variants"),
    ("trtllm-allreduce", r"\b(one|two)[Ss]hot_?[Aa]ll_?[Rr]educe\w*[Kk]ernel\b", "all_reduce",
     "oneShotAllReduceKernel, twoShotAllReduceKernel, MNNVL twoshot_allreduce_kernel"),
    # Microsoft MSCCL++ src/ext/collectives (mscclpp::collective::allreduceNvlsPacket, ...), its executor
    ("mscclpp", r"(^|[\s:(])mscclpp::", "", "mscclpp::collective::allreduce*/allgather*/alltoallv*, executionKernel"),
    # NVSHMEM device functions and its on-stream collectives (host/coll, h_to_d_coll_defs.h); PyTorch's
    # c10d::nvshmem_extension kernels (allToAllV, exchangeSplitAndOffset) carry the namespace
    ("nvshmem", r"(?i)nvshmem", "", "nvshmem*/nvshmemi* device functions, c10d::nvshmem_extension"),
    ("nvshmem", r"^(void )?(barrier|barrier_all|sync|sync_all|alltoall|broadcast|fcollect|rdxn|reducescatter)"
     r"_on_stream_kernel", "", "NVSHMEM on-stream collectives: barrier_on_stream_kernel, fcollect_on_stream_kernel<T>"),
    ("gloo", r"^gloo:", "", "gloo's worker-thread spans on CPU runs"),
)  # fmt: skip

# Expert-parallel libraries: without group metadata their kernels are attributed to dimension ``ep``.
EP_LIBRARIES = frozenset({"deepep", "mori"})
