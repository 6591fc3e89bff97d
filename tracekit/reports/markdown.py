"""A Markdown summary of the gate, fit for a CI job summary ($GITHUB_STEP_SUMMARY): verdict, failures first,
then every check in a table."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from .. import units
from ..gate.result import CheckResult, GateReport
from .base import StreamReporter
from .safe_text import markdown_text as _cell


def _row(c: CheckResult) -> str:
    status = "✅ pass" if c.passed else "❌ FAIL"
    base = units.metric_stat(c.metric, c.baseline) if c.kind == "regression" else ""
    now = units.metric_stat(c.metric, c.current)
    if c.kind == "regression":
        limit = f"±{units.compact_percent(c.limit, 0)}" if c.limit is not None else ""
        change = units.change(c.change) if c.current is not None and c.baseline is not None else ""
    else:
        limit = f"{c.op} {units.metric_value(c.metric, c.limit)}"
        change = ""
    # only the name is untrusted (a budget expression, a group name from a trace); the rest tracekit formatted
    return "| " + " | ".join((status, _cell(c.kind), _cell(c.name), base, now, change, limit)) + " |"


def render_markdown(report: GateReport) -> str:
    verdict = "✅ passed" if report.passed else "❌ failed"
    lines = [
        f"## tracekit check {verdict}",
        "",
        f"{len(report.checks) - len(report.failures)} of {len(report.checks)} checks passed"
        f" — run {_cell(report.current_source)}"
        + (f" against baseline {_cell(report.baseline_source)}" if report.baseline_source else "")
        + ".",
        "",
    ]
    ident = ", ".join(f"{k}: {v}" for k, v in report.identity.items() if v not in (None, {}))
    if ident:
        lines += [f"Run: {_cell(ident)}", ""]
    if report.failures:
        lines += ["### Failures", ""] + [f"- {_cell(c.message)}" for c in report.failures] + [""]
    for note in report.notes:
        lines.append(f"> {_cell(note)}")
    if report.notes:
        lines.append("")
    if report.warnings:
        lines += ["### Warnings", ""] + [f"- ⚠️ {_cell(w)}" for w in report.warnings] + [""]
    lines += ["### Checks", "", "| | kind | check | baseline | now | change | limit |", "|---|---|---|---|---|---|---|"] + [
        _row(c) for c in report.checks
    ]
    lines += ["", "Values are medians over steps (per rank, then across ranks); the spread is the range of the per-step values."]
    return "\n".join(lines) + "\n"


class MarkdownReporter(StreamReporter):
    """`tracekit check --markdown FILE`: the verdict for a CI job summary ($GITHUB_STEP_SUMMARY)."""

    format = "markdown"
    suffix = ".md"
    document = GateReport

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        stream.write(render_markdown(doc))
        return ()


def write_markdown(report: GateReport, path: str | Path) -> None:
    MarkdownReporter().render(report, path)


def render_summary_markdown(summary: Any, top: int = 10, wide: bool = False, full_names: bool = False) -> str:
    """`tracekit analyze --format markdown`: the terminal view's tables as GitHub-flavoured Markdown, for an issue
    or a CI job summary (every string from a trace made inert by markdown_text)."""
    from . import summary_tables as st

    lines = ["## tracekit analyze", ""] + [f"- {_cell(x)}" for x in st.headline_lines(summary)] + [""]
    from .critical_tables import critical_sections

    sections = st.build(summary, top=top, wide=wide, full_names=full_names)
    for s in sections + critical_sections(summary, top=top, wide=wide, full_names=full_names):
        # titles and headers are tracekit's own words; the cells may hold names from a trace
        lines += [
            f"### {s.title}",
            "",
            "| " + " | ".join(s.headers) + " |",
            "|" + "|".join("---:" if n else "---" for n in s.numeric) + "|",
        ]
        lines += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in s.rows]
        lines += [""] + [f"_{_cell(n)}_" for n in s.notes] + ([""] if s.notes else [])
    notes = [*st.unavailable_notes(summary.get("ranks") or []), *st.group_warnings(summary.get("warnings") or [])]
    if notes:
        lines += ["### Notes and warnings", ""] + [f"- {_cell(n)}" for n in notes] + [""]
    return "\n".join(lines)


class SummaryMarkdown(StreamReporter):
    """`tracekit analyze --format markdown`: the summary's tables in Markdown; options ``top``, ``wide``,
    ``full_names``."""

    format = "markdown"
    suffix = ".md"
    document = Mapping

    def check(self, doc: Any) -> None:
        from .base import check_summary

        check_summary(doc)

    def write(
        self, doc: Any, stream: IO[Any], *, top: int = 10, wide: bool = False, full_names: bool = False, **_: Any
    ) -> tuple[str, ...]:
        stream.write(render_summary_markdown(doc, top, wide, full_names))
        return ()
