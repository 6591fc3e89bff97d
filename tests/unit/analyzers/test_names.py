"""short_name on the issue's examples and on the real kernel names of the GPU traces in tests/data."""

import gzip
import json
from pathlib import Path

import pytest

from tracekit.analyzers.names import short_name

DATA = Path(__file__).resolve().parents[2] / "data" / "kineto-gpu"

CASES = [
    (
        "void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int, int, void**, int**, int, void*, int)",
        "dpsk::ep::internode::cached_notify<false>",
    ),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_AllGather_RING_LL"),
    # real names from the traces in tests/data/kineto-gpu
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
        "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
        "at::native::vectorized_elementwise_kernel<4, …>",
    ),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    (
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
        "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)",
        "cudnn::ops::nchwToNhwcKernel<float, …>",
    ),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>"
        "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4::Params)",
        "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>",
    ),
    (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, "
        "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
        "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float)",
        "at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<2>, …>",
    ),
    (
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, at::detail::Array<char*, "
        "2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
        "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, ...)",
        "at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(…), …>",
    ),
    (
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, false, true, true, false, "
        "7, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >"
        "(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>)",
        "internal::gemvx::kernel<int, …>",
    ),
    ("volta_sgemm_128x32_nt", "volta_sgemm_128x32_nt"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    ("Memset (Device)", "Memset (Device)"),
    ("void broken<int(", "void broken<int"),  # unbalanced: the name up to its parameter list, never an error
    ("", ""),
]


@pytest.mark.parametrize(("name", "short"), CASES)
def test_short_name(name, short):
    assert short_name(name) == short


def trace_kernel_names() -> set[str]:
    names = set()
    for path in sorted(DATA.glob("*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        names |= {e["name"] for e in events if e.get("cat") == "kernel"}
    return names


def test_every_real_kernel_name_reduces_to_a_qualified_name():
    names = trace_kernel_names()
    assert len(names) > 300
    shorts = {n: short_name(n) for n in names}
    for name, short in shorts.items():
        assert short and len(short) <= len(name)
        assert not short.startswith(("void ", "std::enable_if")), name
        body = short.replace("(anonymous namespace)", "").replace("(…)", "")
        assert "(" not in body.split("<")[0], name  # no parameter list left
        assert short.count("<") == short.count(">"), name
    # shortening groups template instantiations: fewer distinct names, not one
    assert 100 < len(set(shorts.values())) < len(names)
