"""Rich tables of a tracekit.summary/1 dict. They read the same dict the JSON is written from, so the
terminal shows exactly the JSON's numbers (rounded for display)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _f(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def render_summary(summary: dict, out: str | None = None, top: int = 10) -> None:
    file = open(out, "w", encoding="utf-8") if out else None
    try:
        console = Console(file=file, highlight=False, width=160 if file else None)
        for table in (_ranks(summary), _dimensions(summary), _exposed(summary, top), _stragglers(summary),
                      _unrecognised(summary)):
            if table.row_count:
                console.print(table)
        for w in summary.get("warnings", []):
            console.print(f"[yellow]warning:[/] {escape(w)}")
    finally:
        if file:
            file.close()


def _ranks(s: dict) -> Table:
    t = Table(title="Per rank (µs, totals over steps)")
    for col in ("rank", "steps", "wall", "compute", "comm", "hidden", "exposed", "overlap", "idle", "memcpy",
                "multi-stream comm", "wait"):
        t.add_column(col, justify="right")
    for r in s["ranks"]:
        tot = r["totals"]
        t.add_row(str(r["rank"]), str(len(r["steps"])), _f(tot["wall_us"]), _f(tot["compute_us"]),
                  _f(tot["comm_us"]), _f(tot["hidden_comm_us"]), _f(tot["exposed_comm_us"]),
                  _pct(tot["overlap_ratio"]), _f(tot["idle_us"]), _f(tot["memcpy_us"]),
                  _f(tot["multi_stream_comm_us"]), _f(r.get("wait_us")))
    return t


def _dimensions(s: dict) -> Table:
    t = Table(title="Per dimension × op (µs, summed over ranks)")
    for col in ("dimension", "op", "count", "bytes", "comm", "hidden", "exposed", "wait", "transfer", "busbw GB/s"):
        t.add_column(col, justify="right" if col not in ("dimension", "op") else "left")
    for d in s["by_dimension"]:
        t.add_row(escape(d["dimension"]), escape(d["op"]), str(d["count"]), f"{d['bytes']:,}", _f(d["comm_us"]),
                  _f(d["hidden_comm_us"]), _f(d["exposed_comm_us"]), _f(d["wait_us"]), _f(d["transfer_us"]),
                  _f(d["busbw_gbps"], 2))
    return t


def _exposed(s: dict, top: int) -> Table:
    t = Table(title=f"Top {top} exposed collectives (µs)")
    for col in ("rank", "step", "op", "dimension", "pg", "seq", "dur", "exposed", "wait", "transfer", "busbw GB/s"):
        t.add_column(col, justify="right")
    rows = sorted(s["collectives"], key=lambda c: -c["exposed_us"])[:top]
    for c in rows:
        t.add_row(str(c["rank"]), str(c["step"]), escape(c["op"]), escape(c["dimension"]),
                  escape(c["pg_desc"] or c["pg_name"]), str(c["seq"]), _f(c["dur_us"]), _f(c["exposed_us"]),
                  _f(c["wait_us"]), _f(c["transfer_us"]), _f(c["busbw_gbps"], 2))
    return t


def _stragglers(s: dict) -> Table:
    t = Table(title="Stragglers (who arrives last) and clock offsets")
    for col in ("rank", "last arrivals", "of instances", "mean lateness µs", "caused wait µs", "clock offset µs",
                "± spread µs"):
        t.add_column(col, justify="right")
    offsets = {o["rank"]: o for o in s["clock_offsets"]}
    for st in s["stragglers"]:
        o = offsets.get(st["rank"], {})
        t.add_row(str(st["rank"]), str(st["last_arrivals"]), str(st["instances"]), _f(st["mean_lateness_us"]),
                  _f(st["total_caused_wait_us"]), _f(o.get("offset_us")), _f(o.get("spread_us")))
    return t


def _unrecognised(s: dict) -> Table:
    t = Table(title="Unrecognised kernels on communication streams (a comm rule may be missing)")
    for col in ("kernel", "count", "total µs", "streams"):
        t.add_column(col)
    for k in s["unrecognised_kernels"]:
        t.add_row(escape(k["name"][:100]), str(k["count"]), _f(k["total_us"]), ", ".join(map(str, k["streams"])))
    return t
