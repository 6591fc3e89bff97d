"""`tracekit hang` on the terminal and in Markdown: the verdict, the suspects with their evidence (most direct
first), then every process group: the last collective all its members reached, who entered the next and who
never did, who completed it; then the mismatches and the warnings."""

from __future__ import annotations

from typing import IO, Any

from .. import units
from ..analyzers.flight.results import HangReport
from .base import StreamReporter
from .safe_text import markdown_text, printable
from .view import span

_COLUMNS = ("group", "dimension", "members", "status", "every member reached", "next", "entered", "never reached", "completed")


def _verdict(d: dict) -> str:
    n, want = len(d["ranks"]), len(d["expected_ranks"])
    what = "HANG or MISMATCH found" if d["verdict"] == "hang" else "consistent: every group's members agree"
    return f"tracekit hang: {what} ({n} of {want} ranks dumped)"


def _completed(g: dict) -> str:
    return "not recorded" if g["completed"] is None else span(g["completed"])


def _row(g: dict) -> list[str]:
    label = g["name"] if not g["desc"] or g["desc"] == g["name"] else f"{g['name']} ({g['desc']})"
    return [
        label,
        g["dimension"],
        span(g["members"]),
        g["status"],
        f"{g['reached_seq']} {g['reached']}".strip() if g["reached_seq"] else "none",
        str(g["next_seq"]) if g["next_seq"] > 0 else units.NA,
        span(g["entered_next"]) if g["entered_next"] else units.NA,
        span(g["missing_next"]) if g["missing_next"] else units.NA,
        _completed(g),
    ]


class HangTable(StreamReporter):
    format = "table"
    document = HangReport

    def write(self, doc: Any, stream: IO[Any], *, width: int | None = None, **_: Any) -> tuple[str, ...]:
        from rich.markup import escape
        from rich.table import Table

        from .terminal import console as terminal_console
        from .terminal import output_width

        d = doc.to_dict()
        out = terminal_console(file=stream, highlight=False, width=output_width(stream, width))
        out.print(escape(printable(_verdict(d))))
        if d["suspect_ranks"]:
            out.print("suspect ranks, most direct evidence first:")
            for s in d["suspect_ranks"]:
                for i, text in enumerate(s["evidence"]):
                    head = f"  rank {s['rank']:<4}" if i == 0 else " " * 11
                    out.print(escape(f"{head} {printable(text)}"), overflow="fold")
        table = Table(title="process groups")
        for col in _COLUMNS:
            table.add_column(col, overflow="fold")
        for g in d["groups"]:
            table.add_row(*(escape(printable(c)) for c in _row(g)))
        out.print(table)
        for g in d["groups"]:
            by_rank = ", ".join(f"{r}: {s if s >= 0 else '?'}" for r, s in g["last_seq_by_rank"].items())
            out.print(escape(printable(f"group {g['name']}: last collective per rank {by_rank}")), overflow="fold")
        for e in d["evidence"]:
            if e["kind"] == "timed_out":
                out.print(escape(printable(e["text"])))
        for w in d["warnings"]:
            out.print(f"[yellow]warning:[/yellow] {escape(printable(w))}", overflow="fold")
        return ()


class HangMarkdown(StreamReporter):
    format = "markdown"
    suffix = ".md"
    document = HangReport

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        d = doc.to_dict()
        lines = [f"## {markdown_text(_verdict(d))}", ""]
        if d["suspect_ranks"]:
            lines += ["### Suspect ranks (most direct evidence first)", ""]
            for s in d["suspect_ranks"]:
                lines.append(f"- **rank {s['rank']}**: " + "; ".join(markdown_text(t) for t in s["evidence"]))
            lines.append("")
        lines += ["### Process groups", "", "| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
        lines += ["| " + " | ".join(markdown_text(c) for c in _row(g)) + " |" for g in d["groups"]]
        lines.append("")
        if d["warnings"]:
            lines += ["### Warnings", ""] + [f"- {markdown_text(w)}" for w in d["warnings"]] + [""]
        stream.write("\n".join(lines))
        return ()
