"""Device type from evidence (issue 27 item 7): each kind of evidence on a hand-built trace, the order in which
they decide, and `tracekit info` naming the evidence that decided."""

import pytest
from click.testing import CliRunner

from tests.helpers import kineto
from tracekit.cli import cli


def _doc(runtime="cudaLaunchKernel", kernel="void k<float>(float*)", cat="kernel", **header):
    launch = {**kineto.LAUNCH, "name": runtime}
    return kineto.trace([kineto.STEP, launch, {**kineto.kernel(kernel, 120, 30), "cat": cat}], **header)


AMD = [{"id": 0, "name": "AMD Instinct MI300X", "gcnArchName": "gfx942:sramecc+:xnack-", "warpSize": 64}]
NV = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "warpSize": 32}]


@pytest.mark.parametrize(
    "doc, device, evidence",
    [
        (_doc(roctracer_version="4.1", hip_runtime_version="60131199"), "rocm", "header roctracer_version 4.1"),
        (_doc(cupti_version=18), "cuda", "header cupti_version 18"),
        (_doc(runtime="hipLaunchKernel"), "rocm", "hip* calls"),  # ROCm files them under cuda_runtime too
        (_doc(runtime="hipExtModuleLaunchKernel", deviceProperties=NV), "rocm", "hip* calls"),  # calls before props
        (_doc(runtime="someLaunch", deviceProperties=AMD), "rocm", "gcnArchName gfx942"),
        (_doc(runtime="someLaunch", deviceProperties=NV), "cuda", "NVIDIA H100"),
        (_doc(runtime="someLaunch", kernel="void rccl_k<float>(float*)"), "rocm", "kernel name"),
        (_doc(runtime="someLaunch"), "cuda", "CUDA assumed"),
        (_doc(cat="mtia_ccp_events", roctracer_version="4.1"), "mtia", "event categories mtia_ccp_events"),
        (kineto.trace([kineto.STEP]), "cpu", "no device activity"),
    ],
)
def test_device_type_and_its_evidence(tmp_path, doc, device, evidence):
    _, info = kineto.load(kineto.write(tmp_path, doc))
    assert info.device_type == device
    assert evidence in info.generation["platform_evidence"]


def test_a_header_version_of_the_wrong_type_is_dropped_with_a_warning(tmp_path):
    _, info = kineto.load(kineto.write(tmp_path, _doc(runtime="someLaunch", roctracer_version={"x": 1})))
    assert info.device_type == "cuda" and any("roctracer_version" in w for w in info.warnings)


def test_info_says_which_evidence_decided(tmp_path):
    path = kineto.write(tmp_path, _doc(roctracer_version="4.1"))
    res = CliRunner().invoke(cli, ["info", path, "--no-cache"])
    assert res.exit_code == 0, res.output
    assert "device: rocm (from header roctracer_version 4.1)" in res.output
