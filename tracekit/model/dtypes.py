"""Element types in one table: how tracekit's options name them (``bf16``), torch's name, bytes per element,
how Kineto traces and run manifests spell them. The loader (bytes of a collective), the memory model (bytes
of an activation), the manifest reader and the reference workloads all derive their look-ups from DTYPES.

The rows are c10's ``AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS`` (c10/core/ScalarType.h, torch/headeronly/
core/ScalarType.h), every scalar type PyTorch has, with the size of its C++ type. A trace spells one in three
ways: the ScalarType's name (``toString``: ``Long``, ``BFloat16``, ``Float8_e4m3fn``; ``record_param_comms``'
``dtype``), the demangled C++ type (``caffe2::TypeMeta::name``: ``long int``, ``unsigned char``, ``c10::Half``,
``c10::complex<float>``; an operator's ``Input type``), or torch's Python name (``torch.int64``). Spellings are
compared in lower case with any ``c10::``/``at::``/``torch.`` prefix removed (``spelling_key``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dtype:
    short: str | None  # the value of --dtype and of a manifest's model dtype ("bf16"); None: not offered there
    torch_name: str  # the attribute of torch ("bfloat16")
    element_bytes: int
    trace_names: tuple[str, ...]  # spellings in traces, as spelling_key leaves them ("long int", "half", "long")
    manifest_names: tuple[str, ...] = ()  # torch-style spellings of a run.json model dtype meaning this one
    workload: bool = False  # the reference workloads can run in it


def _dt(torch_name: str, scalar_type: str, cpp: tuple[str, ...], size: int, **kw) -> Dtype:
    """One ScalarType: its torch name, its c10 name and its C++ spellings (as ``spelling_key`` leaves them)."""
    names = tuple(dict.fromkeys((scalar_type.lower(), torch_name, *cpp)))
    return Dtype(kw.pop("short", None), torch_name, size, names, **kw)


DTYPES: tuple[Dtype, ...] = (
    _dt("uint8", "Byte", ("unsigned char", "uint8_t"), 1),
    _dt("int8", "Char", ("signed char", "int8_t"), 1),
    _dt("int16", "Short", ("short int", "short", "int16_t"), 2),
    _dt("int32", "Int", ("int", "int32_t"), 4),
    _dt("int64", "Long", ("long int", "long long int", "long", "int64_t"), 8),
    _dt("float16", "Half", ("half",), 2, short="fp16", manifest_names=("float16", "half")),
    _dt("float32", "Float", ("float",), 4, short="fp32", manifest_names=("float32", "float"), workload=True),
    _dt("float64", "Double", ("double",), 8),
    _dt("complex32", "ComplexHalf", ("complex<half>", "chalf"), 4),
    _dt("complex64", "ComplexFloat", ("complex<float>", "cfloat"), 8),
    _dt("complex128", "ComplexDouble", ("complex<double>", "cdouble"), 16),
    _dt("bool", "Bool", (), 1),
    _dt("qint8", "QInt8", (), 1),
    _dt("quint8", "QUInt8", (), 1),
    _dt("qint32", "QInt32", (), 4),
    _dt("bfloat16", "BFloat16", (), 2, short="bf16", manifest_names=("bfloat16",), workload=True),
    _dt("quint4x2", "QUInt4x2", (), 1),
    _dt("quint2x4", "QUInt2x4", (), 1),
    _dt("bits1x8", "Bits1x8", (), 1),
    _dt("bits2x4", "Bits2x4", (), 1),
    _dt("bits4x2", "Bits4x2", (), 1),
    _dt("bits8", "Bits8", (), 1),
    _dt("bits16", "Bits16", (), 2),
    _dt("float8_e5m2", "Float8_e5m2", (), 1),
    _dt("float8_e4m3fn", "Float8_e4m3fn", (), 1, short="fp8", manifest_names=("float8",)),
    _dt("float8_e5m2fnuz", "Float8_e5m2fnuz", (), 1),
    _dt("float8_e4m3fnuz", "Float8_e4m3fnuz", (), 1),
    _dt("uint16", "UInt16", ("short unsigned int", "unsigned short", "uint16_t"), 2),
    _dt("uint32", "UInt32", ("unsigned int", "uint32_t"), 4),
    _dt("uint64", "UInt64", ("long unsigned int", "unsigned long", "long long unsigned int", "uint64_t"), 8),
    *(_dt(f"uint{n}", f"UInt{n}", (f"dummy_uint1_7_t<{n}>",), 1) for n in range(1, 8)),
    *(_dt(f"int{n}", f"Int{n}", (f"dummy_int1_7_t<{n}>",), 1) for n in range(1, 8)),
    _dt("float8_e8m0fnu", "Float8_e8m0fnu", (), 1),
    _dt("float4_e2m1fn_x2", "Float4_e2m1fn_x2", (), 1),
)

_PREFIXES = ("c10::", "at::", "torch.", "caffe2::")


def spelling_key(text: str) -> str:
    """A dtype spelling as DTYPES lists it: lower case, namespace prefixes gone, single spaces."""
    key = " ".join(text.split()).lower()
    for p in _PREFIXES:
        key = key.replace(p, "")
    return key.replace("< ", "<").replace(" >", ">")


# Trace spelling (spelling_key) -> bytes per element (the loader's bytes of a collective).
TRACE_BYTES: dict[str, int] = {n: d.element_bytes for d in DTYPES for n in d.trace_names}
# --dtype value -> bytes per element (the activation-memory model).
SHORT_BYTES: dict[str, int] = {d.short: d.element_bytes for d in DTYPES if d.short}
# A manifest's torch-style model dtype -> its --dtype value.
SHORT_BY_MANIFEST_NAME: dict[str, str] = {n: d.short for d in DTYPES if d.short for n in d.manifest_names}
# --dtype value -> torch attribute name, for the reference workloads.
WORKLOAD_TORCH_NAMES: dict[str, str] = {d.short: d.torch_name for d in DTYPES if d.short and d.workload}
