"""short_name on the issue's examples and on the real kernel names of the GPU traces in tests/data."""

import functools
import gzip
import json
from pathlib import Path

import pytest

from tracekit.analyzers.names import distinct_short_names, short_name

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
        "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4",  # the wrapper's argument is the kernel
    ),
    # the function name, not its return type: a comparison inside parentheses is no bracket (issue 27)
    (
        "std::enable_if<(8>(0))&&(vllm::_typeConvert<c10::BFloat16>::exists), void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, "
        "float, int, int)",
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, …>",
    ),
    (
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<flash::CollectiveMainloopBwd"
        "<2, 1, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::bfloat16_t, float>, flash::"
        "CollectiveEpilogueBwd<cute::tuple<cute::C<64> >, cutlass::bfloat16_t>, flash::SingleTileScheduler> > >"
        "(flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<>>::Params)",
        "flash::FlashAttnBwdSm90<flash::CollectiveMainloopBwd<2, …>, …>",
    ),
    (
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
        "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedFP8<4>, "
        "cutlass::float_e4m3_t>, void, void> >(cutlass::gemm::kernel::GemmUniversal<>::Params)",
        "cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, …>, …>",
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


@functools.cache
def trace_kernel_names() -> frozenset[str]:
    names = set()
    for path in sorted(DATA.glob("*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        names |= {e["name"] for e in events if e.get("cat") == "kernel"}
    return frozenset(names)


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


def _fp8(stage: int) -> str:
    return (
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<cute::tuple"
        f"<int, int, int> >, cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90ArrayTmaGmma<{stage}>,"
        " cutlass::float_e4m3_t>, void, void> >(cutlass::gemm::kernel::GemmUniversal<>::Params)"
    )


def test_different_kernels_never_share_a_label():
    """Three grouped FP8 GEMMs that differ deep in their template arguments, a flash-attention backward kernel,
    and the real names of the traces: every distinct name gets a distinct label, equal names equal labels."""
    names = [_fp8(3), _fp8(4), _fp8(5), CASES[-6][0], *sorted(trace_kernel_names())]
    labels = distinct_short_names(names)
    assert len(set(labels)) == len(set(names))
    a, b, c = distinct_short_names([names[0], names[0], names[1]])
    assert a == b != c
    assert [lab for lab in labels[:3]] == sorted(set(labels[:3])) and all("GemmUniversal" in lab for lab in labels[:3])
    by = dict(zip(names, labels))
    fill = next(n for n in names if "FillFunctor<float>, at::detail::Array<char*, 1> >(int" in n and "vectorized" in n)
    assert "FillFunctor<float>" in by[fill]  # what tells it from the other vectorized_elementwise_kernel<4, …>
    unique = [n for n in names if sum(short_name(m) == short_name(n) for m in names) == 1]
    assert all(by[n] == short_name(n) for n in unique)  # a short name that is unique stays as it is


def test_a_huge_name_is_shortened_from_its_head():
    name = "void ns::k<" + "int, " * 400_000 + "int>(float*)"
    assert short_name(name).startswith("void ns::k<int, int")  # unbalanced within the head: up to the "("
    assert len(short_name(name)) <= 8192
