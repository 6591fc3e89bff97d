"""`tracekit check` that could not gate (exit 2 or 3: a baseline of another world size, an unreadable run, a bad
budget): its JUnit and Markdown files are still written, saying why, so a CI job shows more than a missing file.

The JUnit file holds one ``<testcase>`` with an ``<error>`` (errors="1", not a failure: nothing was measured to
fail); the Markdown says the gate did not run, the one-line error and the exit code.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import IO, Any

from .base import StreamReporter
from .safe_text import markdown_text, xml_text

SUITE = "tracekit.check"


@dataclass(frozen=True, slots=True)
class GateError:
    """Why `check` stopped before any check ran: the CLI's one-line error and the exit code it ends with."""

    message: str
    exit_code: int
    current_source: str = ""
    baseline_source: str = ""


def to_junit(err: GateError) -> ET.ElementTree:
    root = ET.Element("testsuites", name=SUITE, tests="1", failures="0", errors="1")
    ts = ET.SubElement(root, "testsuite", name=SUITE, tests="1", failures="0", errors="1", skipped="0")
    props = ET.SubElement(ts, "properties")
    for key, value in (("current", err.current_source), ("baseline", err.baseline_source), ("exit_code", str(err.exit_code))):
        ET.SubElement(props, "property", name=key, value=xml_text(value))
    tc = ET.SubElement(ts, "testcase", classname=f"{SUITE}.gate", name="the gate could run", time="0")
    message = xml_text(err.message)
    error = ET.SubElement(tc, "error", message=message, type="tracekit.could_not_gate")
    error.text = f"tracekit check could not gate (exit {err.exit_code}): {message}"
    ET.indent(root)
    return ET.ElementTree(root)


def render_markdown(err: GateError) -> str:
    against = f" against baseline {markdown_text(err.baseline_source)}" if err.baseline_source else ""
    return (
        f"## tracekit check ⚠️ could not gate (exit {err.exit_code})\n\n"
        f"No check ran for {markdown_text(err.current_source) or 'the run'}{against}:\n\n"
        f"> {markdown_text(err.message)}\n"
    )


class GateErrorJUnit(StreamReporter):
    format = "junit"
    suffix = ".xml"
    binary = True
    document = GateError

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        to_junit(doc).write(stream, encoding="utf-8", xml_declaration=True)
        return ()


class GateErrorMarkdown(StreamReporter):
    format = "markdown"
    suffix = ".md"
    document = GateError

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        stream.write(render_markdown(doc))
        return ()
