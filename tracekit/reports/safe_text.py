"""Text from traces is untrusted: before it reaches a terminal, control characters are shown escaped.

A kernel named ``"\\x1b]0;pwned\\x07"`` would otherwise retitle the terminal, ``"\\x1b[2J"`` clear it, a
carriage return overwrite a line, and bidirectional overrides reorder what is read. Each such character is
printed as its Python escape (``\\x1b``, ``\\u202e``), so the name stays recognisable and inert.
"""

from __future__ import annotations

import re

# C0 controls (tab and newline handled by the caller's choice), DEL, C1 controls, bidi embeddings/overrides/
# isolates, line/paragraph separators, and lone surrogates (which no UTF-8 stream can write).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _esc(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


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
