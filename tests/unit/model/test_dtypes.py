"""The one dtype table and what each reader derives from it."""

from tracekit.analyzers.memory.activation_model import DTYPE_BYTES
from tracekit.analyzers.memory.activation_run import config_from_manifest
from tracekit.loader.classify import dtype_bytes
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


def test_options_manifests_and_workloads():
    assert DTYPE_BYTES == {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}
    assert SHORT_BY_MANIFEST_NAME["half"] == "fp16" and SHORT_BY_MANIFEST_NAME["float8"] == "fp8"
    assert WORKLOAD_TORCH_NAMES == {"fp32": "float32", "bf16": "bfloat16"}
    cfg = config_from_manifest({"model": {"seq": 8, "batch": 1, "hidden": 8, "heads": 2, "dtype": "torch.float32"}})
    assert cfg is not None and cfg.bytes_per_element == 4
