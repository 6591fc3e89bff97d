"""JUnit XML for CI systems: one <testcase> per check, a <failure> with the one-line message when it failed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import IO, Any

from ..gate.result import GateReport
from .base import StreamReporter
from .safe_text import xml_text


def to_junit(report: GateReport, suite: str = "tracekit.check") -> ET.ElementTree:
    """Every name, message and property passes through ``xml_text``: trace strings may hold characters XML 1.0
    cannot (a NUL, an escape sequence, a lone surrogate), which would make the file unreadable to the CI."""
    failures = len(report.failures)
    suite = xml_text(suite)
    root = ET.Element("testsuites", name=suite, tests=str(len(report.checks)), failures=str(failures), errors="0")
    ts = ET.SubElement(
        root, "testsuite", name=suite, tests=str(len(report.checks)), failures=str(failures), errors="0", skipped="0"
    )
    props = ET.SubElement(ts, "properties")
    for key, value in (
        ("current", report.current_source),
        ("baseline", report.baseline_source),
        *((f"run.{k}", str(v)) for k, v in report.identity.items()),
        ("warnings", str(len(report.warnings))),
    ):
        ET.SubElement(props, "property", name=xml_text(key), value=xml_text(value))
    for check in report.checks:
        tc = ET.SubElement(ts, "testcase", classname=xml_text(f"{suite}.{check.kind}"), name=xml_text(check.name), time="0")
        if check.passed:
            ET.SubElement(tc, "system-out").text = xml_text(check.message)
        else:
            message = xml_text(check.message)
            failure = ET.SubElement(tc, "failure", message=message, type=xml_text(f"tracekit.{check.kind}"))
            failure.text = message
    if report.notes:
        ET.SubElement(ts, "system-out").text = xml_text("\n".join(report.notes))
    if report.warnings:
        ET.SubElement(ts, "system-err").text = xml_text("\n".join(f"warning: {w}" for w in report.warnings))
    ET.indent(root)
    return ET.ElementTree(root)


class JUnitReporter(StreamReporter):
    """`tracekit check --junit FILE`: the gate's checks as JUnit XML (UTF-8 bytes, with the XML declaration)."""

    format = "junit"
    suffix = ".xml"
    binary = True
    document = GateReport

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        to_junit(doc).write(stream, encoding="utf-8", xml_declaration=True)
        return ()


def write_junit(report: GateReport, path: str | Path) -> None:
    JUnitReporter().render(report, path)
