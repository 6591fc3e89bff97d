"""Nsight exports written with the real schema (tests/helpers/nsys_export.py): NCCL ranges and payloads give the
collectives their op, bytes and communicator, two exports of one run give matched collectives with known wait,
transfer and clock offset; ranks from the environment or by process order; iteration ranges as steps; the cache;
bad input as one-line errors."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from tests.helpers.nsys_export import GEMM, NCCL_KERNEL, ExportWriter, write_nccl_run
from tracekit.analyzers import analyze
from tracekit.errors import TraceFormatError
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import EventKind as K

NOCACHE = LoadOptions(cache=False)


def test_two_exports_of_one_run_match_with_known_wait_transfer_and_offset(tmp_path):
    truth = write_nccl_run(tmp_path, offsets_ns=[0, 3_000_000], late_ns=200_000)
    ts = load(str(tmp_path), options=NOCACHE, executor="serial")
    assert ts.ranks == [0, 1] and ts.metadata.world_size == 2
    s = analyze(ts).to_dict()
    offsets = {o["rank"]: o["offset_us"] for o in s["clock_offsets"]}
    assert offsets[1] - offsets[0] == pytest.approx(3_000.0, abs=0.01)
    colls = s["collectives"]
    assert len(colls) == 6 and {c["op"] for c in colls} == {"all_reduce"}
    assert {c["pg_name"] for c in colls} == {"0x5eed0000abcd1234"}
    for c in colls:
        assert c["bytes"] == truth["bytes"]
        assert c["wait_us"] * 1000 == pytest.approx(truth["wait_ns"][c["rank"]][c["step"]], abs=1000)  # µs floats of epoch ns
        assert c["transfer_us"] * 1000 == pytest.approx(truth["transfer_ns"][c["step"]], abs=1000)
    assert [st["step"] for st in s["ranks"][0]["steps"]] == [0, 1, 2]
    # both members of the communicator are loaded: its ranks are known, and it is the world group
    (group,) = s["by_process_group"]
    assert group["ranks"] == [0, 1] and group["dimension"] == "world"
    assert analyze(ts, dim_map=("0x5eed*=dp",)).to_dict()["by_process_group"][0]["dimension"] == "dp"


def test_nccl_payload_fields_reach_the_kernel(tmp_path):
    write_nccl_run(tmp_path, ranks=2, steps=1)
    ts = load(str(tmp_path / "rank0.sqlite"), options=NOCACHE, executor="serial")
    t = ts.table(0)
    comm = t.mask_kind(K.COMM)
    assert t.decode("name_id")[comm].tolist() == [NCCL_KERNEL]
    assert t.decode("coll_op_id")[comm].tolist() == ["all_reduce"]
    assert t["group_size"][comm].tolist() == [2] and t["in_bytes"][comm].tolist() == [4 << 20]
    assert ts.info(0).generation["rank"] == "env:RANK" and ts.info(0).world_size == 2
    assert ts.info(0).process_groups[0].size == 2


def _two_process_export(path, env=None):
    """One export holding two GPU processes (torchrun under one nsys): pids 7001 on GPU 1, 7000 on GPU 0."""
    w = ExportWriter(path, env=env)
    for i, (pid, dev) in enumerate(((7001, 1), (7000, 0))):
        g = w.add_process(pid, "python")
        w.add_gpu(dev)
        w.add_runtime([(1_000 + i, 2_000, g | pid, 10 + i, "cudaLaunchKernel_v7000")])
        w.add_kernels([(3_000, 5_000 + 1_000 * dev, dev, 7, 10 + i, g, GEMM)])
    w.close()


def test_one_export_with_two_gpu_processes_is_two_ranks_by_process_order(tmp_path):
    _two_process_export(tmp_path / "all.sqlite", env={"RANK": 5})  # the launcher's environment: not the ranks'
    ts = load(str(tmp_path / "all.sqlite"), options=NOCACHE, executor="serial")
    assert ts.ranks == [0, 1]
    assert [int(np.unique(ts.table(r)["device"][ts.table(r)["device"] >= 0])[0]) for r in ts.ranks] == [0, 1]
    assert [int(ts.table(r)["dur_ns"][ts.table(r).mask_kind(K.KERNEL)][0]) for r in ts.ranks] == [2_000, 3_000]
    assert sum("by process order" in w for w in ts.metadata.warnings) == 2
    # each rank keeps only its own launches
    assert all(int(ts.table(r).mask_kind(K.RUNTIME).sum()) == 1 for r in ts.ranks)


def test_files_without_a_rank_are_numbered_in_natural_file_order(tmp_path):
    for r in (10, 2):
        w = ExportWriter(tmp_path / f"rank{r}.sqlite")
        g = w.add_process(100 + r, "python")
        w.add_kernels([(0, 1_000 + r, 0, 7, 1, g, GEMM)])
        w.close()
    ts = load(str(tmp_path), options=NOCACHE, executor="serial")
    assert [ts.info(r).source.endswith(f"rank{n}.sqlite") for r, n in ((0, 2), (1, 10))] == [True, True]


def test_group_of_sends_and_receives_links_the_kernel_launched_by_group_end(tmp_path):
    w = ExportWriter(tmp_path / "pp.sqlite", env={"RANK": 0, "WORLD_SIZE": 2})
    g = w.add_process(9000, "python")
    gt = g | 9000
    w.add_domain(1, "NCCL", gt)
    w.add_range(100, 200, gt, "ncclCommInitRank", 1, w.nccl_payload(1, "ncclCommInitRank", comm=77, nranks=2, rank=0))
    w.add_range(1_000, 1_100, gt, "ncclGroupStart", 1)
    w.add_range(1_200, 1_300, gt, "ncclSend", 1, w.nccl_payload(1, "ncclSend", comm=77, bytes=1024, peer=1))
    w.add_range(1_210, 1_220, gt, "ncclGroupStart", 1)  # ncclSend's own group calls, nested in it
    w.add_range(1_230, 1_290, gt, "ncclGroupEnd", 1)
    w.add_range(1_400, 1_500, gt, "ncclRecv", 1, w.nccl_payload(1, "ncclRecv", comm=77, bytes=1024, peer=1))
    w.add_range(1_600, 2_000, gt, "ncclGroupEnd", 1)
    w.add_runtime([(1_700, 1_800, gt, 5, "cudaLaunchKernel_v7000")])
    w.add_kernels([(2_100, 9_000, 0, 20, 5, g, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)")])
    w.close()
    t = load(str(tmp_path / "pp.sqlite"), options=NOCACHE, executor="serial").table(0)
    comm = t.mask_kind(K.COMM)
    assert t.decode("coll_op_id")[comm].tolist() == ["send_recv"]
    assert t.decode("pg_name_id")[comm].tolist() == [f"0x{77:016x}"]
    assert (t["in_bytes"][comm].tolist(), t["out_bytes"][comm].tolist()) == ([1024], [1024])


def test_copy_launched_inside_an_nccl_range_is_communication(tmp_path):
    """NCCL's copy-engine collectives run as copies: launched from inside ncclAllGather, the copy is the transfer."""
    w = ExportWriter(tmp_path / "ce.sqlite")
    g = w.add_process(9100, "python")
    gt = g | 9100
    w.add_domain(1, "NCCL", gt)
    w.add_range(1_000, 2_000, gt, "ncclAllGather", 1, w.nccl_payload(1, "ncclAllGather", comm=5, bytes=4096))
    w.add_runtime([(1_100, 1_200, gt, 8, "cudaMemcpyAsync_v3020"), (3_000, 3_100, gt, 9, "cudaMemcpyAsync_v3020")])
    w.add_memcpy([(2_500, 4_000, 0, 21, 8, g, 4096, 10, 3, 3), (5_000, 6_000, 0, 21, 9, g, 4096, 8, 3, 3)])
    w.close()
    t = load(str(tmp_path / "ce.sqlite"), options=NOCACHE, executor="serial").table(0)
    dev = t["device"] >= 0
    assert t.decode("name_id")[dev].tolist() == ["Memcpy PtoP (Device -> Device)", "Memcpy DtoD (Device -> Device)"]
    assert [K(k).name for k in t["kind"][dev].tolist()] == ["COMM", "MEMCPY"]
    assert t.decode("coll_op_id")[dev].tolist() == ["all_gather", None]


def test_profiler_step_ranges_win_over_iteration_ranges_and_emit_nvtx_names_are_normalised(tmp_path):
    w = ExportWriter(tmp_path / "steps.sqlite")
    g = w.add_process(9200, "python")
    gt = g | 9200
    for s in range(2):
        t0 = 10_000 * s
        w.add_range(t0, t0 + 9_000, gt, f"iteration {s}")
        w.add_range(t0 + 10, t0 + 8_000, gt, f"ProfilerStep#{s + 40}")
        w.add_range(t0 + 20, t0 + 900, gt, f"aten::mm, seq = {s}, op_id = {7 + s}, sizes = [[8, 8], [8, 8]]", registered=s == 0)
    w.add_kernels([(100, 200, 0, 7, -1, g, GEMM)])
    w.close()
    t = load(str(tmp_path / "steps.sqlite"), options=NOCACHE, executor="serial").table(0)
    assert sorted(set(t["step"][t.mask_kind(K.STEP)].tolist())) == [40, 41]
    ops = t.mask_kind(K.CPU_OP)
    assert t.decode("name_id")[ops].tolist() == ["aten::mm", "aten::mm"]
    assert t.decode("cat_id")[ops].tolist() == ["cpu_op", "cpu_op"]
    assert int(t.mask_kind(K.ANNOTATION).sum()) == 2  # "iteration N": annotations here, a --window candidate


def test_iteration_ranges_are_the_steps_without_profiler_steps(tmp_path):
    write_nccl_run(tmp_path, ranks=1, steps=3, env=False)
    ts = load(str(tmp_path), options=NOCACHE, executor="serial")
    assert sorted(set(ts.table(0)["step"][ts.table(0).mask_kind(K.STEP)].tolist())) == [0, 1, 2]
    assert any("'iteration N'" in w for w in ts.metadata.warnings)


def test_cache_holds_every_rank_of_an_export_and_serves_the_same_tables(tmp_path):
    _two_process_export(tmp_path / "all.sqlite")
    cache = LoadOptions(cache_dir=str(tmp_path / "cache"))
    first = load(str(tmp_path / "all.sqlite"), options=cache, executor="serial")
    assert len(os.listdir(tmp_path / "cache")) == 2
    again = load(str(tmp_path / "all.sqlite"), options=cache, executor="serial")
    for r in first.ranks:
        a, b = first.table(r), again.table(r)
        assert a.strings == b.strings and all(np.array_equal(a[k], b[k]) for k in a.columns)
        assert first.info(r) == again.info(r)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"traceEvents": []}', "not an SQLite database"),
        (b"", "not an SQLite database"),
        (None, "without any Nsight Systems table"),
    ],
)
def test_bad_exports_are_one_line_errors(tmp_path, content, needle):
    path = tmp_path / "bad.sqlite"
    if content is None:
        import sqlite3

        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (a INTEGER)")
        con.commit()
        con.close()
    else:
        path.write_bytes(content)
    with pytest.raises(TraceFormatError, match=needle) as err:
        load(str(path), options=NOCACHE, executor="serial")
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_truncated_export_is_a_one_line_error(tmp_path):
    write_nccl_run(tmp_path, ranks=1, steps=2)
    data = (tmp_path / "rank0.sqlite").read_bytes()
    (tmp_path / "cut.sqlite").write_bytes(data[: len(data) // 3])
    os.remove(tmp_path / "rank0.sqlite")
    with pytest.raises(TraceFormatError) as err:
        load(str(tmp_path / "cut.sqlite"), options=NOCACHE, executor="serial")
    assert "\n" not in str(err.value)


def test_text_in_integer_columns_reads_as_absent(tmp_path):
    """An export is untrusted: a text where nsys writes an integer is absent, never a crash or a wrong number."""
    w = ExportWriter(tmp_path / "odd.sqlite")
    g = w.add_process(9300, "python")
    w.add_kernels([(100, 900, 0, 7, 1, g, GEMM), (1_000, 2_000, 0, 7, 2, g, GEMM)])
    w.db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET streamId = 'seven', correlationId = 'x' WHERE start = 1000")
    w.close()
    t = load(str(tmp_path / "odd.sqlite"), options=NOCACHE, executor="serial").table(0)
    k = t.mask_kind(K.KERNEL)
    assert t["stream"][k].tolist() == [7, -1] and t["correlation"][k].tolist() == [1, -1]


def test_report_without_nsys_says_how_to_export(tmp_path, monkeypatch):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"QDSTRM")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(TraceFormatError, match=r"nsys export --type sqlite .*run\.nsys-rep"):
        load(str(rep), options=NOCACHE, executor="serial")


def test_report_is_exported_with_the_nsys_on_path(tmp_path, monkeypatch):
    """The conversion's plumbing, with a stand-in `nsys` (the real CLI is not installable here) that writes an
    export where --output says, as `nsys export --type sqlite` does."""
    write_nccl_run(tmp_path, ranks=1, steps=2)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"QDSTRM")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "nsys"
    fake.write_text(f'#!/bin/sh\nwhile [ "$1" != "--output" ]; do shift; done\ncp {tmp_path / "rank0.sqlite"} "$2"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    ts = load(str(rep), options=LoadOptions(cache_dir=str(tmp_path / "c")), executor="serial")
    assert int(ts.table(0).mask_kind(K.COMM).sum()) == 2


def test_directory_with_report_and_its_export_reads_the_export_once(tmp_path):
    write_nccl_run(tmp_path, ranks=1, steps=1)
    (tmp_path / "rank0.nsys-rep").write_bytes(b"QDSTRM")
    ts = load(str(tmp_path), options=NOCACHE, executor="serial")
    assert ts.ranks == [0] and ts.info(0).source.endswith("rank0.sqlite")


def _union(ivs):
    total, cur = 0, None
    for s, e in sorted(ivs):
        if cur is None or s > cur[1]:
            total += cur[1] - cur[0] if cur else 0
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur else 0)


def test_compute_and_communication_per_rank_equal_the_sql_reading(tmp_path):
    """The generated run's per-rank compute (union of the non-NCCL kernels), communication (union of the NCCL
    kernels) and exposed communication (NCCL time outside compute), read with sqlite3 and plain Python."""
    import sqlite3

    write_nccl_run(tmp_path, ranks=2, steps=3)
    s = analyze(load(str(tmp_path), options=NOCACHE, executor="serial")).to_dict()
    for r in (0, 1):
        con = sqlite3.connect(f"file:{tmp_path / f'rank{r}.sqlite'}?mode=ro", uri=True)
        rows = con.execute(
            "SELECT k.start, k.\"end\", s.value LIKE 'nccl%' FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName"
        ).fetchall()
        con.close()
        comp = [(a, b) for a, b, c in rows if not c]
        comm = [(a, b) for a, b, c in rows if c]
        hidden = _union([(max(a, x), min(b, y)) for a, b in comm for x, y in comp if min(b, y) > max(a, x)])
        totals = s["ranks"][r]["totals"]
        assert totals["compute_us"] * 1000 == pytest.approx(_union(comp), abs=1)
        assert totals["comm_us"] * 1000 == pytest.approx(_union(comm), abs=1)
        assert totals["exposed_comm_us"] * 1000 == pytest.approx(_union(comm) - hidden, abs=1)


@pytest.mark.parametrize(("table", "cost"), [("CUPTI_ACTIVITY_KIND_RUNTIME", "no launch edges"), ("StringIds", "no names")])
def test_missing_table_is_a_warning_naming_its_cost(tmp_path, table, cost):
    write_nccl_run(tmp_path, ranks=1, steps=1)
    import sqlite3

    con = sqlite3.connect(tmp_path / "rank0.sqlite")
    con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    ts = load(str(tmp_path / "rank0.sqlite"), options=NOCACHE, executor="serial")
    assert any(table in w and cost in w for w in ts.metadata.warnings)
    assert int(ts.table(0).mask_kind(K.KERNEL, K.COMM).sum()) == 2


def test_without_the_sqlite_driver_the_error_names_the_extra(tmp_path, monkeypatch):
    import sys

    from tracekit.errors import MissingDependencyError

    write_nccl_run(tmp_path, ranks=1, steps=1)
    monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)
    with pytest.raises(MissingDependencyError, match=r"tracekit\[nsys\]"):
        load(str(tmp_path / "rank0.sqlite"), options=NOCACHE, executor="serial")
