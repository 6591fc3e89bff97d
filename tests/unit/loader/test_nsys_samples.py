"""The four public Nsight Systems exports (tests/data/nsys, three schema generations): what the loader builds
equals what SQL reads straight from each file -- per-GPU kernel counts, time sums and interval unions, counts per
kernel name, copy bytes -- and each export's quirk is handled (duplicated runtime rows, no NVTX table, GPUs listed
but unused, a synthetic minimal schema). The oracle is sqlite3 and plain Python; it imports nothing of tracekit."""

from __future__ import annotations

import sqlite3
from collections import Counter

import numpy as np
import pytest

from tests.helpers.data import DATA
from tracekit.analyzers import analyze
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import EventKind as K

NSYS = DATA / "nsys"
SAMPLES = sorted(p.name for p in NSYS.glob("*.sqlite"))


def _sql(name: str, query: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{NSYS / name}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _union(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            total += (cur_e - cur_s) if cur_e is not None else 0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


def _oracle(name: str) -> dict:
    rows = _sql(
        name,
        'SELECT k.deviceId, k.start, k."end", s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k '
        "JOIN StringIds s ON s.id = k.demangledName",
    )
    per: dict = {}
    for dev, s, e, n in rows:
        d = per.setdefault(dev, {"count": 0, "sum": 0, "iv": [], "names": Counter()})
        d["count"] += 1
        d["sum"] += e - s
        d["iv"].append((s, e))
        d["names"][n] += 1
    return {dev: {"count": d["count"], "sum": d["sum"], "union": _union(d["iv"]), "names": d["names"]} for dev, d in per.items()}


@pytest.fixture(scope="module", params=SAMPLES)
def loaded(request):
    return request.param, load(str(NSYS / request.param), options=LoadOptions(cache=False), executor="serial")


def test_kernels_per_gpu_equal_the_sql_reading(loaded):
    name, ts = loaded
    assert ts.ranks == [0]
    t = ts.table(0)
    dev = t.mask_kind(K.KERNEL, K.COMM)
    ours = {}
    for d in np.unique(t["device"][dev]).tolist():
        m = dev & (t["device"] == d)
        ivs = list(zip(t["ts_ns"][m].tolist(), t.end_ns[m].tolist()))
        ours[d] = {
            "count": int(m.sum()),
            "sum": int(t["dur_ns"][m].sum()),
            "union": _union(ivs),
            "names": Counter(t.decode("name_id")[m].tolist()),
        }
    assert ours == _oracle(name)


def test_compute_of_the_analysis_is_the_sql_union(loaded):
    """No sample has communication: the analysis' compute over the one window is the union of all kernels."""
    name, ts = loaded
    (oracle,) = _oracle(name).values()  # every sample runs its kernels on one GPU
    totals = analyze(ts).to_dict()["ranks"][0]["totals"]
    assert totals["compute_us"] * 1000 == pytest.approx(oracle["union"], abs=1)
    assert totals["comm_us"] == 0


def test_copy_bytes_equal_the_sql_reading(loaded):
    name, ts = loaded
    t = ts.table(0)
    m = t.mask_kind(K.MEMCPY)
    oracle = _sql(name, "SELECT count(*), COALESCE(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0]
    assert (int(m.sum()), int(t["mem_bytes"][m].sum())) == oracle


def test_gpus_counted_from_the_work_not_the_target_info():
    """cloverleaf: TARGET_INFO_GPU lists 4 A100s, every kernel runs on device 0."""
    ts = load(str(NSYS / "pipit-cloverleaf-1proc-4gpu-a100-nsys2024.sqlite"), options=LoadOptions(cache=False), executor="serial")
    assert len(_sql("pipit-cloverleaf-1proc-4gpu-a100-nsys2024.sqlite", "SELECT * FROM TARGET_INFO_GPU")) == 4
    info = ts.info(0)
    assert [p["id"] for p in info.device_properties] == [0]
    assert info.device_properties[0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert info.rank == 0 and info.generation["rank"] == "env:PMI_RANK"  # PMI_RANK="0" in META_DATA_CAPTURE


def test_duplicated_runtime_rows_give_one_launch_per_kernel():
    """saxpy (2022.2): each CUDA call is listed twice (the call and its backtrace row, one correlation id)."""
    name = "pipit-saxpy-mpi-1gpu-a100-nsys2022.sqlite"
    ts = load(str(NSYS / name), options=LoadOptions(cache=False), executor="serial")
    t = ts.table(0)
    rt = t.mask_kind(K.RUNTIME)
    (distinct,) = _sql(name, "SELECT count(DISTINCT correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0]
    assert int(rt.sum()) == distinct == 57
    assert len(np.unique(t["correlation"][rt])) == int(rt.sum())
    launches = Counter(t.decode("name_id")[rt].tolist())
    assert launches["cudaLaunchKernel"] == 5 and "cudaLaunchKernel_v7000" not in launches
    # every kernel joins exactly one launch, and the launch statistics see them
    kern = t["correlation"][t.mask_kind(K.KERNEL)]
    assert all(int((t["correlation"][rt] == c).sum()) == 1 for c in kern.tolist())
    # the MPI and saxpy NVTX ranges are host annotations (22 ranges: 5 saxpy, 17 MPI_*)
    names = Counter(t.decode("name_id")[t.mask_kind(K.ANNOTATION)].tolist())
    assert names["saxpy"] == 5 and names["MPI_Send"] == 10 and names["MPI_Recv"] == 5


@pytest.mark.parametrize("name", ["nsysai-mock-1gpu-rtx3080-nsys2026.sqlite", "pipit-cloverleaf-1proc-4gpu-a100-nsys2024.sqlite"])
def test_missing_nvtx_table_is_a_warning_that_names_the_cost(name):
    ts = load(str(NSYS / name), options=LoadOptions(cache=False), executor="serial")
    (w,) = [w for w in ts.metadata.warnings if "NVTX_EVENTS" in w]
    assert "no steps" in w and name in w


def test_synthetic_minimal_schema_known_idle():
    """healthy_1pct: 400 kernels of exactly 1 ms, 10 µs apart (kernel span 403.99 ms, gaps 3.99 ms); no globalPid,
    no PROCESSES, no session start, a two-column TARGET_INFO_GPU. The one window runs from the first event (a launch
    call 3 µs before the first kernel) to the last kernel's end, so idle is the gaps plus those 3 µs."""
    name = "nsysai-healthy-1pct-synthetic.sqlite"
    ts = load(str(NSYS / name), options=LoadOptions(cache=False), executor="serial")
    totals = analyze(ts).to_dict()["ranks"][0]["totals"]
    ((first, last),) = _sql(
        name, 'SELECT (SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME), max("end") FROM CUPTI_ACTIVITY_KIND_KERNEL'
    )
    assert (first, last) == (-3_000, 403_990_000)
    assert totals["wall_us"] * 1000 == pytest.approx(last - first, abs=1)
    assert totals["idle_us"] * 1000 == pytest.approx(3_990_000 + 3_000, abs=1)
    assert totals["compute_us"] * 1000 == pytest.approx(400_000_000, abs=1)
    assert any("TARGET_INFO_SESSION_START_TIME" in w for w in ts.metadata.warnings)
