"""Notebook reprs (issue 32): a TraceSet, an EventTable, an Analysis and its results show counts and the headline in
a short repr and a small HTML table, never their columns or string tables; an 8-rank run stays under 2 KB."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tracekit
from tests.helpers.tables import ev, table, traceset
from tracekit.model.traceset import ProcessGroup, RankInfo, TraceSet

N_RANKS, N_STEPS, KERNELS, COMMS = 8, 3, 900, 60
STEP_NS = 1_000_000


def _rank(r: int):
    rows = [ev("STEP", s * STEP_NS, STEP_NS, step=s, name=f"ProfilerStep#{s}") for s in range(N_STEPS)]
    for i in range(KERNELS):  # a distinct long name each: a string table a default repr would print whole
        s = i % N_STEPS
        rows.append(ev("KERNEL", s * STEP_NS + (i // N_STEPS) * 1000, 600, step=s, name=f"void kernel_{i}<float, {'x' * 40}>"))
    for i in range(COMMS):
        s = i % N_STEPS
        rows.append(
            ev(
                "COMM",
                s * STEP_NS + (i // N_STEPS) * 40_000 + 300,
                900,
                step=s,
                stream=20,
                name="ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                coll_op="all_reduce",
                pg_name="0",
                pg_desc="default_pg",
                pg_ranks=str(list(range(N_RANKS))),
                group_size=N_RANKS,
                seq=i,
                in_bytes=4096,
                out_bytes=4096,
            )
        )
    return table(rows)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[TraceSet, object]:
    d = tmp_path_factory.mktemp("traces")
    base = traceset({r: _rank(r) for r in range(N_RANKS)}, manifest={"command_line": ["x" * 50] * 200}, backend="nccl")
    groups = (ProcessGroup("0", "default_pg", tuple(range(N_RANKS)), N_RANKS, "nccl"),)
    infos = {r: RankInfo(r, N_RANKS, "nccl", str(d / f"rank{r}.json.gz"), groups, "cuda") for r in range(N_RANKS)}
    ts = TraceSet(base.tables, infos, base.metadata)
    return ts, tracekit.analyze(ts)


def test_reprs_of_an_8_rank_run_are_short_and_say_what_it_holds(run):
    ts, a = run
    assert sum(len(t.strings) for _, t in ts) > N_RANKS * KERNELS  # what a field-by-field repr would print
    text = repr(ts)
    assert len(text) < 2048, len(text)
    assert text.startswith("TraceSet(8 ranks 0–7, ") and f"{N_RANKS * (N_STEPS + KERNELS + COMMS):,} events" in text
    assert "3 steps" in text and "nccl/cuda" in text and "kernel_" not in text
    text = repr(a)
    assert len(text) < 2048, len(text)
    assert f"{N_RANKS * N_STEPS}/{N_RANKS * N_STEPS} complete steps" in text
    # the oracle, by hand: each step is its 1 ms ProfilerStep window; in it kernels at [1000 m, +600] ns (m < 300)
    # and collectives at [40000 j + 300, +900] (j < 20), of which j < 8 hide 300 + 200 ns each under kernels
    per_step = COMMS // N_STEPS
    wall_ns = STEP_NS
    step_ms = float(re.search(r"step time ([\d.]+) ms", text).group(1))
    assert step_ms == pytest.approx(wall_ns / 1e6, abs=5e-4)
    share = float(re.search(r"overlap ([\d.]+) %", text).group(1)) / 100
    assert share == pytest.approx(8 * 500 / (per_step * 900), abs=5e-4)
    assert f"{N_RANKS * COMMS:,} collectives" in text and "kernel_" not in text
    for part in (a.comm, a.comm.ranks[0], a.comm.instances, a.breakdowns[0], ts.table(0), ts.metadata):
        assert len(repr(part)) < 600 and "kernel_1" not in repr(part), type(part)


def test_html_reprs_are_one_small_table(run):
    ts, a = run
    for obj, rows in ((ts, N_RANKS), (a, N_RANKS), (ts.table(0), 3)):
        html = obj._repr_html_()
        assert len(html) < 8_000 and html.count("<table>") == 1
        assert html.count("<tr>") - 1 == rows, html  # a header row, then one per rank / kind
    assert "<td>rank0.json.gz</td>" in ts._repr_html_()
    evil = TraceSet(
        ts.tables, {**ts.ranks_info, 0: RankInfo(0, N_RANKS, source="/t/<img src=x onerror=alert(1)>.json")}, ts.metadata
    )
    assert "<img" not in evil._repr_html_() and "&lt;img src=x onerror=alert(1)&gt;.json" in evil._repr_html_()


def test_an_event_table_counts_its_kinds(run):
    ts, _ = run
    t = ts.table(0)
    text = repr(t)
    assert text.startswith(f"EventTable({len(t):,} events, 3 steps, {len(t.strings):,} strings; KERNEL {KERNELS}, COMM {COMMS}")
    assert int(np.count_nonzero(t["kind"] == 0)) == KERNELS
