"""The gate's CI outputs stay well-formed and inert whatever a trace string holds: JUnit XML parses back, the
Markdown job summary can hold no HTML, link or image made from input, and the terminal gets no escape byte."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from tests.helpers.summaries import tp_run
from tracekit.cli import cli
from tracekit.gate.result import CheckResult, GateReport
from tracekit.reports.junit import write_junit
from tracekit.reports.markdown import render_markdown

CONTROLS = "".join(map(chr, range(0x20))) + "\x7f"
HOSTILE = [
    "ctl" + CONTROLS + "end",
    "lone \ud800 surrogate",
    "\x1b[31mred\x1b[0m",
    "<script>alert(1)</script>",
    "[x](javascript:alert(1))",
    "![](http://evil/x.png)",
    "a|b",
    "line1\nline2",
    "www.evil.com a@b.example",
    "`code` \\| **b**",
]
# What XML 1.0 cannot hold (and CR, which a parser turns into LF): shown as Python escapes, nothing else changes.
_XML_BAD = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _xml_expected(text: str) -> str:
    return _XML_BAD.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


def _report(name: str) -> GateReport:
    checks = (
        CheckResult("budget", name, False, f"{name} over budget", "exposed_comm_us", limit=1.0, op="<="),
        CheckResult("regression", name + "#2", True, f"ok: {name}", "exposed_comm_us"),
    )
    return GateReport(
        checks,
        current_source=f"runs/{name}",
        baseline_source=name,
        identity={"workload": name, "world_size": 2},
        notes=(f"note {name}",),
        warnings=(f"warn {name}",),
    )


@pytest.mark.parametrize("name", HOSTILE)
def test_junit_parses_back_and_keeps_the_text(tmp_path, name):
    out = tmp_path / "v.xml"
    write_junit(_report(name), out)
    root = ET.parse(out).getroot()  # well-formed, or this raises
    want = _xml_expected(name)
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == [want, want + "#2"]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("message") == failure.text == f"{want} over budget"
    assert cases[1].findtext("system-out") == f"ok: {want}"
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["current"] == f"runs/{want}" and props["baseline"] == want and props["run.workload"] == want
    assert root.find("./testsuite/system-out").text == f"note {want}"
    assert root.find("./testsuite/system-err").text == f"warning: warn {want}"


@pytest.mark.parametrize("name", HOSTILE)
def test_markdown_can_hold_no_html_link_or_image_from_input(name):
    md = render_markdown(_report(name))
    md.encode("utf-8")  # no lone surrogate left: the file can be written
    assert "<script" not in md and "<" not in md.replace("<=", "")  # only tracekit's own "<=" limit remains
    assert "](" not in md and "![" not in md and "`" not in md.replace("\\`", "")
    assert "\x1b" not in md and not re.search("[\x00-\x08\x0b-\x1f\x7f]", md)
    assert "http://" not in md and "www." not in md and "@" not in md  # no GFM autolink either
    table = [line for line in md.splitlines() if line.startswith(("| ✅", "| ❌"))]
    assert len(table) == 2
    for line in table:  # no pipe from input splits a cell: seven cells, eight unescaped pipes
        assert len(re.findall(r"(?<!\\)\|", line)) == 8
    assert md.count("\n### ") == 3  # a newline from input starts no new block


def test_markdown_keeps_plain_names_readable():
    md = render_markdown(_report("tp/all_gather:exposed_comm_us"))
    assert "| tp/all_gather:exposed_comm_us |" in md and "run runs/tp/all_gather:exposed_comm_us against" in md


def test_baseline_echo_has_no_escape_byte(tmp_path):
    src = tmp_path / "run.json"
    src.write_text(json.dumps(tp_run([100.0], workload="\x1b]0;pwned\x07\x1b[2Jevil")))
    r = CliRunner().invoke(cli, ["baseline", str(src), "-o", str(tmp_path / "b.json")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "baseline written to" in r.output and "\\x1b]0;pwned\\x07\\x1b[2Jevil" in r.output
    assert "\x1b" not in r.output and "\x07" not in r.output


def test_check_outputs_of_a_hostile_workload_are_well_formed(tmp_path):
    """End to end: `tracekit check --junit --markdown` on a summary whose workload name is hostile."""
    name = "".join(HOSTILE).replace("\ud800", "")  # JSON files hold no lone surrogate once written by json.dumps
    src = tmp_path / "now.json"
    src.write_text(json.dumps(tp_run([100.0], workload=name)))
    junit, md = tmp_path / "v.xml", tmp_path / "v.md"
    r = CliRunner().invoke(
        cli,
        ["check", str(src), "--budget", "tp/all_gather:exposed_comm_us<=1", "--junit", str(junit), "--markdown", str(md)],
        catch_exceptions=False,
    )
    assert r.exit_code == 1, r.output
    assert "\x1b" not in r.output
    props = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert props["run.workload"] == _xml_expected(name)
    text = md.read_text(encoding="utf-8")
    assert "<script" not in text and "](" not in text and "![" not in text and "\x1b" not in text
