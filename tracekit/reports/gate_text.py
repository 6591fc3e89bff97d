"""`tracekit check` on the terminal: one line per check (``ok``/``FAIL`` and its message), then the verdict."""

from __future__ import annotations

from typing import IO, Any

from ..gate.result import GateReport
from .base import StreamReporter
from .safe_text import printable


class CheckText(StreamReporter):
    """Option ``quiet``: only the failed checks and the verdict."""

    format = "text"
    document = GateReport

    def write(self, doc: Any, stream: IO[Any], *, quiet: bool = False, **_: Any) -> tuple[str, ...]:
        for c in doc.checks:
            if not (quiet and c.passed):
                stream.write(f"{'ok  ' if c.passed else 'FAIL'}  {printable(c.message)}\n")
        stream.write(printable(doc.headline()) + "\n")
        return ()
