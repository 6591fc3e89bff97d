"""`tracekit analyze DIR` on Flight Recorder dumps, on the terminal and in Markdown: per dimension and group the
collectives, the wait of each rank for its last peer, the skew, the queueing delay, duration and transfer where
recorded, the interval and gap between collectives, the stragglers (the words of the Kineto analysis), the most
skewed collectives, and the agreement with Kineto traces of the same run when there are any."""

from __future__ import annotations

from typing import IO, Any

from .. import units
from ..analyzers.flight.timing_results import FlightTiming
from .base import StreamReporter
from .safe_text import markdown_text, printable
from .view import span

_FIGURES = (
    ("collectives", "instances", None),
    ("wait", "wait_us", units.duration),
    ("skew (mean)", "mean_skew_us", units.duration),
    ("interval (mean)", "mean_interval_us", units.duration),
    ("queueing (mean)", "mean_queue_us", units.duration),
    ("duration (mean)", "mean_duration_us", units.duration),
    ("transfer (mean)", "mean_transfer_us", units.duration),
    ("gap (mean)", "mean_gap_us", units.duration),
)


def _cells(row: dict) -> list[str]:
    return [str(row[k]) if fmt is None else fmt(row[k]) for _, k, fmt in _FIGURES]


def _straggler(s: dict) -> str:
    return (
        f"rank {s['rank']}: last to arrive in {s['last_arrivals']} of {s['instances']} collectives, "
        f"{units.duration(s['mean_lateness_us'])} after the next-latest peer (mean), "
        f"{units.duration(s['total_caused_wait_us'])} of waiting caused"
    )


def _recorded(d: dict) -> str:
    rec = d["recorded"]
    have = [k for k in ("arrival", "queue", "duration", "completion") if rec.get(k)]
    missing = [k for k in ("queue", "duration", "completion") if not rec.get(k)]
    text = f"recorded: {', '.join(have) or 'nothing'}"
    if missing:
        text += f"; not recorded by this backend: {', '.join(missing)} (their figures are {units.NA})"
    return text


def _kineto_lines(k: dict | None) -> list[str]:
    if k is None:
        return []
    lines = [
        f"Kineto traces beside the dumps: {k['common']} of their {k['kineto_collectives']} matched collectives found "
        f"under FR's sequence numbers ({k['op_mismatches']} left out: ops differ)"
    ]
    for d in k["dimensions"]:
        lines.append(
            f"  {d['dimension']}: {d['collectives']} collectives, wait Kineto {units.duration(d['kineto_wait_us'])} / "
            f"Flight Recorder {units.duration(d['flight_wait_us'])}, median difference "
            f"{units.duration(d['median_abs_diff_us'])} per rank, same last arriver in "
            f"{units.percent(d['last_arrival_agreement'])}, straggler rank {d['kineto_straggler']} by Kineto, "
            f"rank {d['flight_straggler']} by the Flight Recorder"
        )
    return lines


class FlightTimingTable(StreamReporter):
    format = "table"
    document = FlightTiming

    def write(self, doc: Any, stream: IO[Any], *, width: int | None = None, **_: Any) -> tuple[str, ...]:
        from rich.markup import escape
        from rich.table import Table

        from .terminal import console as terminal_console
        from .terminal import output_width

        d = doc.to_dict()
        out = terminal_console(file=stream, highlight=False, width=output_width(stream, width))
        out.print(escape(printable(f"tracekit analyze: Flight Recorder dumps of {span(d['ranks'])} ranks in {d['directory']}")))
        out.print(escape(_recorded(d)))
        for title, rows, key in (("by dimension", d["dimensions"], "dimension"), ("by process group", d["groups"], "name")):
            table = Table(title=title)
            for col in (key, *(c for c, _, _ in _FIGURES)):
                table.add_column(col, overflow="fold", justify="left" if col == key else "right")
            for row in rows:
                label = row[key] if key == "dimension" else f"{row['name']} {row['desc']} [{row['dimension']}]"
                table.add_row(escape(printable(label)), *_cells(row))
            out.print(table)
        if d["stragglers"]:
            out.print("stragglers (by arrival):")
            for s in d["stragglers"]:
                out.print(f"  {_straggler(s)}")
        for i in d["inversion"]:
            out.print(
                f"  rank {i['rank']}: shortest duration in {i['shortest_count']} collectives "
                f"({units.duration(i['mean_shorter_us'])} shorter than its peers): late by the inversion rule"
            )
        if d["collectives"]:
            out.print("most skewed collectives:")
            for c in d["collectives"]:
                out.print(
                    escape(
                        printable(
                            f"  group {c['group']} [{c['dimension']}] #{c['seq']} {c['op']} {c['input_sizes']}: ranks "
                            f"{span(c['ranks'])}, first rank {c['first_rank']}, last rank {c['last_rank']}, skew "
                            f"{units.duration(c['skew_us'])}"
                        )
                    )
                )
        for line in _kineto_lines(d["kineto"]) + [f"note: {n}" for n in d["notes"]]:
            out.print(escape(printable(line)), overflow="fold")
        for w in d["warnings"]:
            out.print(f"[yellow]warning:[/yellow] {escape(printable(w))}", overflow="fold")
        return ()


class FlightTimingMarkdown(StreamReporter):
    format = "markdown"
    document = FlightTiming

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        d = doc.to_dict()
        head = ["dimension", *(c for c, _, _ in _FIGURES)]
        lines = [f"## Flight Recorder timing of {span(d['ranks'])} ranks", "", markdown_text(_recorded(d)), ""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join([markdown_text(r["dimension"]), *_cells(r)]) + " |" for r in d["dimensions"]]
        lines.append("")
        if d["stragglers"]:
            lines += ["### Stragglers", ""] + [f"- {_straggler(s)}" for s in d["stragglers"]] + [""]
        lines += [markdown_text(x) for x in _kineto_lines(d["kineto"])]
        stream.write("\n".join(lines) + "\n")
        return ()
