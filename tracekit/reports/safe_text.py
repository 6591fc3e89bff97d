"""Text from traces is untrusted: before it reaches a terminal, control characters are shown escaped.

A kernel named ``"\\x1b]0;pwned\\x07"`` would otherwise retitle the terminal, ``"\\x1b[2J"`` clear it, a
carriage return overwrite a line, and bidirectional overrides reorder what is read. Each such character is
printed as its Python escape (``\\x1b``, ``\\u202e``), so the name stays recognisable and inert.
"""

from __future__ import annotations

import re

# C0 controls (tab and newline handled by the caller's choice), DEL, C1 controls, bidi embeddings/overrides/
# isolates, line/paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _esc(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: object, *, multiline: bool = False) -> str:
    """``text`` with every control character escaped; newlines and tabs kept only when ``multiline``."""
    return (_UNSAFE if multiline else _UNSAFE_LINE).sub(_esc, str(text))
