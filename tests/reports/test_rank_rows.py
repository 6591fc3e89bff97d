"""Tables with one row per rank beyond MAX_RANK_ROWS ranks (tracekit/reports/rank_rows.py), on the summary of a
generated 20-rank run cut to each rank's longest rows: the table names the ranks it covers, its min / median / p90
/ max rows are the summary's values at those places of each column sorted, then come the ranks worst by the
table's key figure, each cell the summary's."""

from __future__ import annotations

import pytest

from tests.helpers.multirank import generate
from tests.helpers.rank_layout import Layout
from tests.reports.test_terminal import check, tables
from tracekit.analyzers.files import analyze_files
from tracekit.loader.loading import LoadOptions
from tracekit.reports.rank_rows import MAX_RANK_ROWS
from tracekit.reports.terminal import render_text

TOP = 10
# of n values sorted, the places of min, median, p90, max: 20 values, the 1st, 10th, 18th and 20th; 19 values (a
# rank never last: not a straggler), the 1st, 10th, 18th and 19th
PLACES = {20: {"min": 0, "median": 9, "p90": 17, "max": 19}, 19: {"min": 0, "median": 9, "p90": 17, "max": 18}}


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    out = tmp_path_factory.mktemp("run20")
    generate(str(out), Layout(2, 2, 5), gpus_per_node=4, workers=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEKIT_FULL_DETAIL_RANKS", "8")
        return analyze_files([str(out)], options=LoadOptions(cache=False), executor="serial", progress=False).to_dict()


@pytest.fixture(scope="module")
def shown(summary):
    return tables(render_text(summary, width=260, top=TOP))


def _summarised(rows: list[dict], table: list[dict], cells: dict[str, str], key: str, sign=1.0) -> None:
    """``table``: the four distribution rows of ``rows`` over ``cells`` (table label -> summary field), then the
    TOP rows largest by ``key`` (times ``sign``), each with its rank's values."""
    places = PLACES[len(rows)]
    assert [t["rank"] for t in table[:4]] == list(places)
    for t in table[:4]:
        for label, f in cells.items():
            check(t[label], sorted(r[f] for r in rows)[places[t["rank"]]])
    worst = sorted(rows, key=lambda r: (-sign * r[key], r["rank"]))[:TOP]
    assert [int(t["rank"]) for t in table[4:]] == [r["rank"] for r in worst]
    for t, r in zip(table[4:], worst):
        for label, f in cells.items():
            check(t[label], r[f])


def test_per_rank_totals(summary, shown):
    table = shown["per rank (totals over complete steps): ranks 0–19 (20)"]
    rows = [{"rank": r["rank"], **r["totals"], "wait_us": r["wait_us"]} for r in summary["ranks"]]
    cells = {"wall": "wall_us", "comm": "comm_us", "exposed": "exposed_comm_us", "wait": "wait_us"}
    _summarised(rows, table, cells, "exposed_comm_us")


def test_stragglers_and_clock_offsets(summary, shown):
    cells = {"caused wait": "total_caused_wait_us", "mean late": "mean_lateness_us"}
    (title,) = [t for t in shown if t.startswith("stragglers (who arrives last): ranks ")]
    assert title.endswith(f" ({len(summary['stragglers'])})")
    _summarised(summary["stragglers"], shown[title], cells, "total_caused_wait_us")
    offsets = [{**o, "size": abs(o["offset_us"])} for o in summary["clock_offsets"]]
    table = shown["clock offsets (against the lowest rank): ranks 0–19 (20)"]
    _summarised(offsets, table, {"offset": "offset_us", "±": "spread_us"}, "size")


def test_idle_and_launches(summary, shown):
    idle = [{"rank": r["rank"], **r["idle_breakdown"]} for r in summary["ranks"]]
    table = shown["device idle time by cause: ranks 0–19 (20)"]
    _summarised(idle, table, {"idle": "idle_us", "host wait": "host_wait_us"}, "idle_us")
    launches = [{"rank": r["rank"], **r["launch_stats"]} for r in summary["ranks"]]
    table = shown["kernel launches: ranks 0–19 (20)"]
    _summarised(launches, table, {"median delay": "median_delay_us", "p95 delay": "p95_delay_us"}, "p95_delay_us")


def test_kernels_of_a_cut_summary_are_its_own_rows(summary, shown):
    """Rank 0 keeps its ten longest kernels: each shown row is one of them (no sum over the kept rows by short
    name, which would not be the rank's)."""
    assert summary["rank_detail"]["kernel_rows_omitted"] > 0
    table = shown["top 10 kernels by device time (rank 0)"]
    kept = summary["ranks"][0]["kernel_breakdown"]
    assert len(table) == len(kept) == TOP
    for t, k in zip(table, sorted(kept, key=lambda k: -k["total_us"])):
        check(t["total"], k["total_us"])
        assert int(t["count"]) == k["count"]


def test_up_to_max_rank_rows_every_rank_has_its_row(summary):
    few = {**summary, "ranks": summary["ranks"][:MAX_RANK_ROWS], "stragglers": summary["stragglers"][:MAX_RANK_ROWS]}
    t = tables(render_text(few, width=260, top=TOP))
    assert [int(r["rank"]) for r in t["per rank (totals over complete steps)"]] == list(range(MAX_RANK_ROWS))
    assert [int(r["rank"]) for r in t["stragglers (who arrives last)"]] == [s["rank"] for s in few["stragglers"]]
    more = {**summary, "ranks": summary["ranks"][: MAX_RANK_ROWS + 1]}
    assert f"per rank (totals over complete steps): ranks 0–{MAX_RANK_ROWS} ({MAX_RANK_ROWS + 1})" in tables(
        render_text(more, width=260, top=TOP)
    )
