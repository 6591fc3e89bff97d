"""The one dtype table and what each reader derives from it: every spelling PyTorch records, with its size, and
an unknown spelling as unknown bytes (null) with a counted warning, never 0 B."""

import contextlib
import json

import pytest

from tests.helpers import kineto
from tracekit.analyzers import analyze
from tracekit.analyzers.memory.activation_model import DTYPE_BYTES
from tracekit.analyzers.memory.activation_run import config_from_manifest
from tracekit.loader.classify import dtype_bytes
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.dtypes import DTYPES, SHORT_BY_MANIFEST_NAME, TRACE_BYTES, WORKLOAD_TORCH_NAMES


def test_each_spelling_is_listed_once():
    names = [n for d in DTYPES for n in d.trace_names]
    assert len(names) == len(set(names))
    shorts = [d.short for d in DTYPES if d.short]
    assert len(shorts) == len(set(shorts))


def test_trace_spellings():
    assert dtype_bytes("Float") == 4 and dtype_bytes("c10::BFloat16") == 2 and dtype_bytes("torch.half") == 2
    assert dtype_bytes("Long") == 8 and dtype_bytes("Bool") == 1 and dtype_bytes("ComplexDouble") == 16
    assert dtype_bytes("Float8_e5m2") == 1 and dtype_bytes("Quaternion") == -1 and dtype_bytes(None) == -1
    assert TRACE_BYTES["double"] == 8


# c10's ScalarType names (toString, as record_param_comms' "dtype" writes them) with the sizes of their C++
# types, written out by hand from c10/core/ScalarType.h: an independent list to hold the table against
SCALAR_TYPES = {
    "Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4, "Double": 8, "ComplexHalf": 4,
    "ComplexFloat": 8, "ComplexDouble": 16, "Bool": 1, "QInt8": 1, "QUInt8": 1, "QInt32": 4, "BFloat16": 2,
    "QUInt4x2": 1, "QUInt2x4": 1, "Bits1x8": 1, "Bits2x4": 1, "Bits4x2": 1, "Bits8": 1, "Bits16": 2,
    "Float8_e5m2": 1, "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1, "Float8_e4m3fnuz": 1, "UInt16": 2, "UInt32": 4,
    "UInt64": 8, "Float8_e8m0fnu": 1, "Float4_e2m1fn_x2": 1,
    **{f"UInt{n}": 1 for n in range(1, 8)}, **{f"Int{n}": 1 for n in range(1, 8)},
}  # fmt: skip
# caffe2::TypeMeta names (an operator's "Input type") as torch 2.13's profiler wrote them on this machine
C_SPELLINGS = {
    "long int": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "short unsigned int": 2,
    "unsigned int": 4, "long unsigned int": 8, "bool": 1, "float": 4, "double": 8, "c10::Half": 2,
    "c10::BFloat16": 2, "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1, "c10::Float4_e2m1fn_x2": 1, "c10::qint8": 1, "c10::quint8": 1, "c10::qint32": 4,
    "c10::dummy_int1_7_t<3>": 1, "c10::dummy_uint1_7_t<7>": 1,
}  # fmt: skip


@pytest.mark.parametrize("table", [SCALAR_TYPES, C_SPELLINGS], ids=["scalar-type-names", "c-spellings"])
def test_every_spelling_has_its_size(table):
    assert {k: dtype_bytes(k) for k in table} == table
    assert {k: dtype_bytes(k.upper()) for k in table} == table  # case does not matter
    assert dtype_bytes("torch.int64") == dtype_bytes("at::Long") == dtype_bytes(" long  int ") == 8


def test_what_the_profiler_records_for_every_torch_dtype(tmp_path):
    """The real thing: torch's profiler on this machine records each dtype's operator input; the table gives the
    size torch itself gives (``element_size``) for every spelling it wrote."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    dtypes = sorted({d for d in vars(torch).values() if isinstance(d, torch.dtype)}, key=str)
    seen = {}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for d in dtypes:
            with contextlib.suppress(RuntimeError, NotImplementedError):  # sub-byte, quantized: no clone
                torch.ops.aten.clone(torch.empty(2, dtype=d))
            seen[str(d)] = torch.empty(0, dtype=d).element_size()
    out = tmp_path / "t.json"
    prof.export_chrome_trace(str(out))
    spellings = {
        e["args"]["Input type"][0]
        for e in json.loads(out.read_text())["traceEvents"]
        if e.get("name") == "aten::clone" and e.get("args", {}).get("Input type")
    }
    assert len(spellings) >= 20  # the clones that ran recorded their spelling
    by_torch = {d.torch_name: d.element_bytes for d in DTYPES}
    assert {k.removeprefix("torch."): v for k, v in seen.items()} == by_torch  # one row per torch dtype, right size
    assert all(dtype_bytes(s) > 0 for s in spellings), sorted(s for s in spellings if dtype_bytes(s) <= 0)


def _a2a_trace(dtype):
    """One all-to-all kernel of 24 elements of ``dtype`` in one step, its args as NCCL traces write them."""
    args = {"Collective name": "all_to_all", "In msg nelems": 24, "Out msg nelems": 24, "dtype": dtype, "Group size": 8}
    return kineto.trace(
        [kineto.STEP, kineto.LAUNCH, kineto.kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 120, 30, **args)]
    )


def _load(path):
    return load([path], options=LoadOptions(cache=False), executor="serial")


def test_long_int_is_eight_bytes_in_a_collective(tmp_path):
    a = analyze(_load(kineto.write(tmp_path, _a2a_trace("long int"))))
    (row,) = a.to_dict()["collectives"]
    assert row["bytes"] == 24 * 8
    assert not any("unknown size" in w for w in a.to_dict()["warnings"])


def test_unknown_spelling_is_null_bytes_and_a_counted_warning(tmp_path):
    a = analyze(_load(kineto.write(tmp_path, _a2a_trace("Quaternion"))))
    (row,) = a.to_dict()["collectives"]
    assert row["bytes"] is None and row["busbw_gbps"] is None
    assert [d["bytes"] for d in a.to_dict()["by_dimension"]] == [None]
    (w,) = [w for w in a.to_dict()["warnings"] if "unknown size" in w]
    assert "1 collectives" in w and "'Quaternion' ×1" in w


def test_options_manifests_and_workloads():
    assert DTYPE_BYTES == {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
    assert SHORT_BY_MANIFEST_NAME["half"] == "fp16" and SHORT_BY_MANIFEST_NAME["float8"] == "fp8"
    assert WORKLOAD_TORCH_NAMES == {"fp32": "float32", "bf16": "bfloat16"}
    cfg = config_from_manifest({"model": {"seq": 8, "batch": 1, "hidden": 8, "heads": 2, "dtype": "torch.float32"}})
    assert cfg is not None and cfg.bytes_per_element == 4
