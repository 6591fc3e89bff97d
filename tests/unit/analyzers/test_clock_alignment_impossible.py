"""Ranks that share no all-reduce-like collective: nothing bounds their clock offset, so the analyzer says
alignment is impossible and computes no cross-rank figure instead of mixing the two clocks. Real traces with
their collectives' process groups taken away (nothing pairs) and hand-built ranks (a send/recv pair, clocks 1 s
apart)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.helpers.data import gpu_trace
from tests.helpers.tables import ev, table, traceset
from tracekit.analyzers import analyze
from tracekit.loader.loading import LoadOptions, load
from tracekit.model.events import EventKind
from tracekit.reports.terminal import render_text
from tracekit.reports.view import clock_note

TP = dict(pg_name="1", pg_desc="tracekit:tp", pg_ranks="[0, 1]", group_size=2)


def p2p_only(shift):
    r0 = [ev("STEP", 0, 1000, step=0, stream=1), ev("COMM", 600, 50, 0, stream=98, coll_op="send", dst_rank=1, in_bytes=64, **TP)]
    r1 = [
        ev("STEP", shift, 1000, step=0, stream=1),
        ev("COMM", 620 + shift, 30, 0, stream=98, coll_op="recv", src_rank=0, in_bytes=64, **TP),
    ]
    return traceset({0: table(r0), 1: table(r1)}, device_type="cpu")


@pytest.fixture(scope="module")
def pp(tmp_path_factory):
    d = tmp_path_factory.mktemp("pp")
    for r in (0, 1):
        shutil.copy(gpu_trace(f"pp-sendrecv-128rank-rank{r}.json.gz"), d)
    traces = load(str(d), options=LoadOptions(cache=False), executor="serial")
    # The loader puts these traces' collectives (no pg_config) on the world group, where some pair by order;
    # without any group nothing can pair them, which is the case this test is about.
    ungrouped = {}
    for rank, t in traces:
        comm = t.mask_kind(EventKind.COMM)
        ungrouped[rank] = t.with_columns(
            pg_name_id=np.where(comm, -1, t["pg_name_id"]).astype(t["pg_name_id"].dtype),
            pg_desc_id=np.where(comm, -1, t["pg_desc_id"]).astype(t["pg_desc_id"].dtype),
        )
    return traces.with_tables(ungrouped)


def test_nothing_paired_real_traces(pp):
    s = analyze(pp).to_dict()
    (w,) = [w for w in s["warnings"] if "clock alignment impossible" in w]
    assert "none paired" in w and "--no-align-clocks" in w
    assert [o["rank"] for o in s["clock_offsets"]] == [0]  # the reference only: rank 1's offset is unknown
    assert all(c["wait_us"] is None and c["skew_us"] is None for c in s["collectives"])
    assert clock_note(s).startswith("clocks not aligned")
    assert "clocks not aligned" in " ".join(render_text(s, width=300).split())


def test_point_to_point_only_gives_no_mixed_clock_figures():
    s = analyze(p2p_only(shift=1_000_000_000)).to_dict()
    (w,) = [w for w in s["warnings"] if "clock alignment impossible" in w]
    assert "point-to-point" in w
    # before: wait = 1 s + 20 ns, the clock difference counted as waiting
    assert all(c["wait_us"] is None and c["transfer_us"] is None for c in s["collectives"])
    assert s["stragglers"] == [] and clock_note(s).startswith("clocks not aligned")


def test_no_align_clocks_computes_on_raw_times():
    s = analyze(p2p_only(shift=0), align_clocks=False).to_dict()
    assert not any("clock alignment impossible" in w for w in s["warnings"])
    send = next(c for c in s["collectives"] if c["op"] == "send")
    assert round(send["wait_us"] * 1e3) == 20  # the user vouched for one clock: figures are computed
