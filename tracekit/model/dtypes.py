"""Element types in one table: how tracekit's options name them (``bf16``), torch's name, bytes per element,
how Kineto traces and run manifests spell them. The loader (bytes of a collective), the memory model (bytes
of an activation), the manifest reader and the reference workloads all derive their look-ups from DTYPES."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Dtype:
    short: str | None  # the value of --dtype and of a manifest's model dtype ("bf16"); None: not offered there
    torch_name: str  # the attribute of torch ("bfloat16")
    element_bytes: int
    trace_names: tuple[str, ...]  # lower-case spellings in traces ("Float", "c10::Half", "torch.bfloat16")
    manifest_names: tuple[str, ...] = ()  # torch-style spellings of a run.json model dtype meaning this one
    workload: bool = False  # the reference workloads can run in it


DTYPES: tuple[Dtype, ...] = (
    Dtype("fp32", "float32", 4, ("float", "float32"), ("float32", "float"), workload=True),
    Dtype(None, "float64", 8, ("double", "float64")),
    Dtype("fp16", "float16", 2, ("half", "float16"), ("float16", "half")),
    Dtype("bf16", "bfloat16", 2, ("bfloat16",), ("bfloat16",), workload=True),
    Dtype("fp8", "float8_e4m3fn", 1, ("float8_e4m3fn",), ("float8",)),
    Dtype(None, "float8_e5m2", 1, ("float8_e5m2",)),
    Dtype(None, "int64", 8, ("long", "int64")),
    Dtype(None, "int32", 4, ("int", "int32")),
    Dtype(None, "int16", 2, ("short", "int16")),
    Dtype(None, "int8", 1, ("char", "int8")),
    Dtype(None, "uint8", 1, ("byte", "uint8")),
    Dtype(None, "bool", 1, ("bool",)),
    Dtype(None, "complex64", 8, ("complexfloat",)),
    Dtype(None, "complex128", 16, ("complexdouble",)),
)

# Trace spelling -> bytes per element (the loader's bytes of a collective).
TRACE_BYTES: dict[str, int] = {n: d.element_bytes for d in DTYPES for n in d.trace_names}
# --dtype value -> bytes per element (the activation-memory model).
SHORT_BYTES: dict[str, int] = {d.short: d.element_bytes for d in DTYPES if d.short}
# A manifest's torch-style model dtype -> its --dtype value.
SHORT_BY_MANIFEST_NAME: dict[str, str] = {n: d.short for d in DTYPES if d.short for n in d.manifest_names}
# --dtype value -> torch attribute name, for the reference workloads.
WORKLOAD_TORCH_NAMES: dict[str, str] = {d.short: d.torch_name for d in DTYPES if d.short and d.workload}
