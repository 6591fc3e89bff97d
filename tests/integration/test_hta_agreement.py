"""The overlap ratio agrees with HTA 0.5.0's get_comm_comp_overlap on every real GPU trace with communication.

HTA analyses the kernels launched before the last ProfilerStep starts, so tracekit's ratio is taken over all
steps but the last. HTA truncates ns-resolution timestamps to whole microseconds, which moves its ratio by up to
~0.45 pp on allreduce-broadcast-2rank-rank0 (tracekit keeps nanoseconds); hence the 0.5 pp tolerance.
"""

import logging
import math
import shutil
from pathlib import Path

import pytest

from tracekit.analyzers import analyze
from tracekit.loader.loading import LoadOptions, load

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto-gpu"
WITH_COMM = [
    "allreduce-broadcast-2rank-rank0",
    "ddp-allreduce-2rank-rank1-oldformat",
    "pp-sendrecv-128rank-rank0",
    "pp-sendrecv-128rank-rank1",
]


def hta_overlap_pct(trace: Path, tmp_path: Path) -> float:
    from hta.trace_analysis import TraceAnalysis

    d = tmp_path / "hta"
    d.mkdir()
    shutil.copy(trace, d / trace.name)
    logging.disable(logging.WARNING)
    try:
        df = TraceAnalysis(trace_dir=str(d)).get_comm_comp_overlap(visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    return float(df["comp_comm_overlap_pctg"].iloc[0])


def tracekit_overlap(trace: Path):
    summary = analyze(load([str(trace)], options=LoadOptions(cache=False), executor="serial"))
    (rank,) = summary.comm.ranks
    steps = [s.step for s in rank.steps]
    return rank, 100 * rank.ratio_over(steps[:-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", WITH_COMM)
def test_overlap_ratio_matches_hta(name, tmp_path):
    trace = DATA / f"{name}.json.gz"
    rank, ours = tracekit_overlap(trace)
    assert rank.totals.comm_ns > 0
    theirs = hta_overlap_pct(trace, tmp_path)
    assert abs(ours - theirs) <= 0.5, f"{name}: tracekit {ours:.2f}% vs HTA {theirs:.2f}%"


@pytest.mark.slow
def test_comm_hta_does_not_recognise_is_where_they_differ(tmp_path):
    """A Transformer Engine userbuffers kernel is communication for tracekit; HTA's `^nccl.*Kernel` rule calls it
    compute. Renaming the NCCL kernels of a real trace leaves tracekit's ratio unchanged and moves HTA's."""
    import gzip
    import json

    src = DATA / "pp-sendrecv-128rank-rank0.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("ncclKernel_"):
            e["name"] = "kuserbuffers_pushrecv"
    renamed = tmp_path / "renamed-rank0.json.gz"
    renamed.write_bytes(gzip.compress(json.dumps(doc).encode()))
    _, ours_before = tracekit_overlap(src)
    _, ours_after = tracekit_overlap(renamed)
    assert ours_after == pytest.approx(ours_before, abs=1e-9)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    hta_before = hta_overlap_pct(src, tmp_path / "a")
    hta_after = hta_overlap_pct(renamed, tmp_path / "b")
    assert abs(hta_before - ours_before) <= 0.5
    # HTA now finds no communication at all (NaN), and counts the comm kernels as compute
    assert math.isnan(hta_after), f"HTA {hta_after}% should no longer see the communication"


# ---- kernel time by type on the conformance corpus (tests/data/kineto-gpu-more) ----
MORE = DATA.parent / "kineto-gpu-more"
BY_TYPE = [
    "oldformat-kernel-runtime-categories",
    "cuda-event-sync",
    "cuda-event-sync-multi-stream",
    "critical-path-simple-add",
    "critical-path-alexnet",
    "mtia-inference-rank0",
    pytest.param("mtia-training-single-rank", marks=pytest.mark.slow),
]


def hta_kernel_types(trace: Path, tmp_path: Path) -> dict[str, float]:
    """HTA's get_gpu_kernel_breakdown: µs per kernel type, overlaps split out ("COMPUTATION overlapping MEMORY")."""
    from hta.trace_analysis import TraceAnalysis

    d = tmp_path / "hta"
    d.mkdir()
    shutil.copy(trace, d / trace.name)
    logging.disable(logging.WARNING)
    try:
        df, _ = TraceAnalysis(trace_dir=str(d)).get_gpu_kernel_breakdown(visualize=False)
    finally:
        logging.disable(logging.NOTSET)
    return {str(k): float(v) for k, v in zip(df["kernel_type"], df["sum"])}


def tracekit_kernel_types(trace: Path, whole_us: bool = False) -> dict[str, float]:
    """The same split from tracekit's kinds, in µs. HTA calls every device event with a stream and no "Sync" in its
    name compute, so its compute also holds the device waits tracekit calls SYNC (CUDA's "Stream Wait Event",
    MTIA's event_record/event_wait): they are added to K here, and only here. ``whole_us``: each event's ts and
    dur truncated to whole µs first, as HTA reads them."""
    import re

    import numpy as np

    from tracekit.analyzers import intervals as iv
    from tracekit.loader.loading import load_file
    from tracekit.model.events import EventKind as K

    t, _ = load_file(str(trace), LoadOptions(cache=False))
    dev = t["device"] >= 0
    names, cats = t.decode("name_id"), t.decode("cat_id")
    hta_waits = (
        t.mask_kind(K.SYNC)
        & dev
        & (cats != "mtia_runtime")
        & np.array([re.search("Sync", str(n)) is None for n in names], dtype=bool)
    )

    ts, dur = t["ts_ns"], t["dur_ns"]
    if whole_us:
        ts, dur = ts // 1000 * 1000, dur // 1000 * 1000

    def union(mask):
        return iv.union(ts[mask], ts[mask] + dur[mask])

    k = iv.merge(union(t.mask_kind(K.KERNEL) & dev), union(hta_waits))
    m, c = union(t.mask_kind(K.MEMCPY, K.MEMSET) & dev), union(t.mask_kind(K.COMM))
    return {
        "COMPUTATION": iv.length(iv.subtract(k, iv.merge(m, c))) / 1e3,
        "MEMORY": iv.length(iv.subtract(m, iv.merge(k, c))) / 1e3,
        "COMPUTATION overlapping MEMORY": iv.length(iv.subtract(iv.intersect(k, m), c)) / 1e3,
        "COMMUNICATION": iv.length(c) / 1e3,
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", BY_TYPE)
def test_kernel_time_by_type_matches_hta(name, tmp_path):
    """Within 0.5 % (at least 2 µs) once every timestamp and duration is truncated to whole µs as HTA reads them
    (without that, MTIA's 22,361 short DMA requests lose 5 % of their time to it in HTA)."""
    trace = MORE / f"{name}.json.gz"
    ours, theirs = tracekit_kernel_types(trace, whole_us=True), hta_kernel_types(trace, tmp_path)
    assert ours["COMPUTATION"] > 0 and ours["COMMUNICATION"] == 0
    memory = theirs.get("MEMORY", 0.0) + theirs.get("COMPUTATION overlapping MEMORY", 0.0)
    for key in ("COMPUTATION", "MEMORY", "COMPUTATION overlapping MEMORY"):
        want = theirs.get(key, 0.0)
        # MTIA memory: HTA leaves out the DMA requests without a "stream" arg (137, 2.4 ms, in the training trace)
        # and their overlap with compute; tracekit places them by their pid. Held to 3 % of the memory time.
        tol = 0.03 * memory if name.startswith("mtia") and "MEMORY" in key else 0.005 * want
        assert abs(ours[key] - want) <= max(2.0, tol), f"{name} {key}: tracekit {ours[key]} vs HTA {want}"


@pytest.mark.slow
def test_triton_host_op_is_not_gpu_time_where_hta_differs(tmp_path):
    """HTA counts the host cpu_op triton_poi_fused_add_cos_sin_0 (it carries a stream arg) as GPU compute: 94 µs.
    The trace's one kernel runs 1.76 µs, which is tracekit's compute."""
    trace = MORE / "triton-kernels.json.gz"
    assert tracekit_kernel_types(trace)["COMPUTATION"] == pytest.approx(1.76)
    assert hta_kernel_types(trace, tmp_path)["COMPUTATION"] >= 90
