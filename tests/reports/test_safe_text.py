"""Every format character (Unicode category Cf) is escaped before it reaches a terminal (issue 29, item 6): the bidi
marks U+200F and U+061C reached it raw while U+202E, U+2066 and U+2069 were escaped."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from tracekit.reports.safe_text import markdown_text, printable


def _format_characters() -> list[str]:
    return [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]


def test_every_format_character_of_this_pythons_unicode_is_escaped():
    """Checked against the running interpreter's unicodedata (Unicode 14 on Python 3.11: 163 characters), not
    against the module's own list: a newer Unicode's additions fail here until they are listed."""
    chars = _format_characters()
    assert len(chars) >= 163 and "\u200f" in chars and "\u061c" in chars
    for ch in chars:
        shown = printable(f"a{ch}b")
        assert ch not in shown and shown.startswith("a\\") and shown.endswith("b"), (hex(ord(ch)), shown)
        assert ch not in markdown_text(f"a{ch}b")


@pytest.mark.parametrize(
    "ch,escape",
    [("\u200f", "\\u200f"), ("\u061c", "\\u061c"), ("\u202e", "\\u202e"), ("\u200b", "\\u200b"), ("\U000e0041", "\\U000e0041")],
)
def test_the_escape_names_the_character(ch, escape):
    assert printable(f"nccl{ch}AllReduce") == f"nccl{escape}AllReduce"


def test_visible_text_is_left_alone():
    """Letters of every script, combining marks, emoji and the no-break space are text, not format characters."""
    text = "ампер 中文 é (e\u0301) \U0001f600 a\u00a0b ٣"
    assert printable(text) == text
