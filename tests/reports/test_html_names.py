"""Kernel names in the HTML report's tables: the short name in the cell, the whole signature as its tooltip, read
back from the page with the standard library's HTML parser and checked against the summary's rows."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from click.testing import CliRunner

from tests.helpers.data import gpu_trace
from tracekit.analyzers.names import short_name
from tracekit.cli import cli


class _Cells(HTMLParser):
    """(table class, [(text, title)] per row) of every <table>."""

    def __init__(self):
        super().__init__()
        self.tables: list[tuple[str, list[list[tuple[str, str | None]]]]] = []
        self._cell: list[str] | None = None
        self._title: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables.append((a.get("class") or "", []))
        elif tag == "tr" and self.tables:
            self.tables[-1][1].append([])
        elif tag == "td":
            self._cell, self._title = [], a.get("title")

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self.tables and self.tables[-1][1]:
            self.tables[-1][1][-1].append(("".join(self._cell).strip(), self._title))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_collective_names_are_short_with_the_full_signature_as_tooltip(tmp_path):
    trace = gpu_trace("pp-sendrecv-128rank-rank0.json.gz")
    runner = CliRunner()
    res = runner.invoke(cli, ["analyze", "--no-cache", "--executor", "serial", "--format", "json", trace])
    assert res.exit_code == 0, res.output
    full = {c["name"] for c in json.loads(res.output)["collectives"]}
    assert any(short_name(n) != n for n in full)  # the fixture has signatures to shorten
    out = tmp_path / "r.html"
    res = runner.invoke(cli, ["report", "--no-cache", "--executor", "serial", "-o", str(out), trace])
    assert res.exit_code == 0, res.output
    page = _Cells()
    page.feed(out.read_text(encoding="utf-8"))
    rows = next(rows for cls, rows in page.tables if "collectives" in cls)
    named = [(text, title) for row in rows for text, title in row if title is not None]
    assert named and len(named) == len([r for r in rows if r])
    for text, title in named:
        assert title in full and text == short_name(title)
