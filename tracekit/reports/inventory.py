"""`tracekit info` on the terminal: a table of the ranks, then per rank its format generation, collectives,
communication by rule and process groups, then the loader's warnings."""

from __future__ import annotations

from typing import IO, Any

from .. import units
from ..analyzers.comm.inventory import Inventory
from .base import StreamReporter
from .safe_text import printable
from .view import span


class InventoryTable(StreamReporter):
    format = "table"
    document = Inventory

    def write(self, doc: Any, stream: IO[Any], *, width: int | None = None, **_: Any) -> tuple[str, ...]:
        from rich.markup import escape
        from rich.table import Table

        from .summary_tables import group_warnings
        from .terminal import console as terminal_console
        from .terminal import output_width

        data = doc.to_dict()
        console = terminal_console(file=stream, highlight=False, width=output_width(stream, width))
        console.print(f"tracekit info: {len(data['ranks'])} rank(s) of world size {data['world_size']}")
        table = Table()
        for col in ("rank", "device", "events", "steps", "device streams", "kernels", "comm", "host ops"):
            table.add_column(
                col,
                overflow="fold",
                no_wrap=col != "device streams",
                justify="right" if col in ("events", "kernels", "comm", "host ops") else "left",
            )
        for r in data["ranks"]:
            k, steps = r["kinds"], r["steps"]
            table.add_row(
                str(r["rank"]),
                escape(printable(r["device_type"])),
                units.grouped(r["events"]),
                span(steps),
                escape(printable(", ".join(r["streams"][:6])) + (" …" if len(r["streams"]) > 6 else "")) or units.NA,
                units.grouped(k.get("kernel", 0)),
                units.grouped(k.get("comm", 0)),
                units.grouped(k.get("cpu_op", 0)),
            )
        console.print(table)
        for r in data["ranks"]:
            for line in _rank_lines(r):
                console.print(escape(printable(f"rank {r['rank']}: {line}")))
        for w in group_warnings(data["warnings"]):
            console.print(f"[yellow]warning:[/yellow] {escape(printable(w))}")
        return ()


def _rank_lines(r: dict[str, Any]) -> list[str]:
    gen = dict(r["generation"])
    evidence = gen.pop("platform_evidence", "")
    lines = [f"device: {r['device_type']}" + (f" (from {evidence})" if evidence else "")]
    lines.append("format: " + ", ".join(f"{a}={b}" for a, b in gen.items()))
    if r["collectives"]:
        lines.append("collectives (op@group): " + ", ".join(f"{c} ×{n}" for c, n in sorted(r["collectives"].items())))
    if r["comm_by_library"]:
        lines.append("communication by rule: " + ", ".join(f"{k} ×{n}" for k, n in sorted(r["comm_by_library"].items())))
    lines += [f"process group {pg['name']} '{pg['desc']}' ranks {_ranks(pg['ranks'])}" for pg in r["process_groups"]]
    if r.get("window_candidates"):
        shown = ", ".join(f"{name!r} ×{n}" for name, n in r["window_candidates"])
        lines.append(f"annotations (candidates for --window NAME): {shown}")
    return lines


def _ranks(ranks: Any) -> str:
    """A group's members as runs (``0–299 (300)``); a list the trace gave as text stays as it was."""
    if isinstance(ranks, (list, tuple)) and all(isinstance(x, int) for x in ranks):
        return span(list(ranks)) if ranks else units.NA
    return str(ranks) if ranks not in (None, "") else units.NA
