"""Text from traces is untrusted: before it reaches a terminal, control characters are shown escaped.

A kernel named ``"\\x1b]0;pwned\\x07"`` would otherwise retitle the terminal, ``"\\x1b[2J"`` clear it, a
carriage return overwrite a line, bidirectional marks and overrides reorder what is read, and invisible format
characters (a zero-width space) make two names look alike. Each such character is printed as its Python escape
(``\\x1b``, ``\\u202e``, ``\\u200b``), so the name stays recognisable and inert.
"""

from __future__ import annotations

import re

# Every format character (Unicode category Cf, through Unicode 15): the bidi marks, embeddings, overrides and isolates
# (U+200E/F, U+061C, U+202A-E, U+2066-9) that reorder what is read, and the invisible ones (soft hyphen, zero-width
# space and joiners, word joiner, BOM, interlinear annotation, tags). tests/unit/reports pins this against the
# running Python's unicodedata, so a newer Unicode's additions are noticed.
_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
# C0 controls (tab and newline handled by the caller's choice), DEL, C1 controls, the format characters, line and
# paragraph separators, and lone surrogates (which no UTF-8 stream can write).
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_FORMAT}\ud800-\udfff]")
_UNSAFE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_FORMAT}\ud800-\udfff]")


def _esc(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def printable(text: object, *, multiline: bool = False) -> str:
    """``text`` with every control character escaped; newlines and tabs kept only when ``multiline``."""
    return (_UNSAFE if multiline else _UNSAFE_LINE).sub(_esc, str(text))


# Everything XML 1.0 forbids (C0 controls but tab/newline, lone surrogates, U+FFFE/U+FFFF), a carriage return
# (which a parser reads back as a newline), and DEL and the C1 controls, which XML 1.0 discourages.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: object) -> str:
    """``text`` fit for an XML 1.0 document: each character XML cannot hold shown as its Python escape
    (``\\x00``, ``\\ud800``); the XML escaping of ``<`` and ``&`` stays the serialiser's job."""
    return _XML_ILLEGAL.sub(_esc, str(text))


# Characters with which Markdown (GFM) makes a link, an image, HTML, a code span or a table cell: each becomes a
# backslash escape or an HTML entity, so a string from a trace stays one inert run of text in a cell or a line.
# The autolinks of GFM start at "://", "www." and "@": those become entities too. Emphasis is left alone.
_MD_ENTITY = {"&": "&amp;", "<": "&lt;", ">": "&gt;", ":": "&#58;", "@": "&#64;"}
_MD_SPECIAL = re.compile(r"[\\`\[\]()!|&<>@]|:(?=//)|(?<=[wW]{3})\.|\n")


def _md(m: re.Match) -> str:
    c = m.group()
    if c == "\n":
        return " "
    if c == ".":  # "www." would be autolinked
        return "&#46;"
    return _MD_ENTITY.get(c) or "\\" + c


def markdown_text(text: object) -> str:
    """``text`` as inert Markdown: no link, image, autolink, HTML, code span or table cell break can come of it;
    newlines become spaces; control characters are escaped as for a terminal."""
    return _MD_SPECIAL.sub(_md, printable(text, multiline=True))
