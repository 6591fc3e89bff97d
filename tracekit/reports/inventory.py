"""`tracekit info` on the terminal: a table of the ranks, then per rank its format generation, collectives,
communication by rule and process groups, then the loader's warnings."""

from __future__ import annotations

from typing import IO, Any

from ..analyzers.inventory import Inventory
from ..formats import units
from .base import StreamReporter
from .safe_text import printable


class InventoryTable(StreamReporter):
    format = "table"
    document = Inventory

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        data = doc.to_dict()
        console = Console(file=stream, highlight=False)
        table = Table(title=f"tracekit info: {len(data['ranks'])} rank(s) of world size {data['world_size']}")
        for col in ("rank", "device", "events", "steps", "device streams", "kernels", "comm", "host ops"):
            table.add_column(col, overflow="fold")
        for r in data["ranks"]:
            k, steps = r["kinds"], r["steps"]
            table.add_row(
                str(r["rank"]), escape(printable(r["device_type"])), units.grouped(r["events"]),
                f"{len(steps)} ({steps[0]}..{steps[-1]})" if steps else "0",
                escape(printable(", ".join(r["streams"][:6])) + (" …" if len(r["streams"]) > 6 else "")) or "-",
                units.grouped(k.get("kernel", 0)), units.grouped(k.get("comm", 0)), units.grouped(k.get("cpu_op", 0)),
            )
        console.print(table)
        for r in data["ranks"]:
            for line in _rank_lines(r):
                console.print(escape(printable(f"rank {r['rank']}: {line}")))
        for w in data["warnings"]:
            console.print(f"[yellow]warning:[/yellow] {escape(printable(w))}")
        return ()


def _rank_lines(r: dict[str, Any]) -> list[str]:
    lines = ["format: " + ", ".join(f"{a}={b}" for a, b in r["generation"].items())]
    if r["collectives"]:
        lines.append("collectives (op@group): " + ", ".join(f"{c} ×{n}" for c, n in sorted(r["collectives"].items())))
    if r["comm_by_library"]:
        lines.append(f"communication by rule: {r['comm_by_library']}")
    lines += [f"process group {pg['name']} '{pg['desc']}' ranks {pg['ranks']}" for pg in r["process_groups"]]
    return lines
