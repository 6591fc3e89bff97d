"""How a command hands its result to a reporter: to stdout, to a file, or as a string."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

from ..reports import Rendered, get_reporter


def emit(doc: Any, format: str, **options: Any) -> tuple[str, ...]:
    """Render ``doc`` with its ``format`` reporter to stdout; returns the reporter's notes."""
    reporter = get_reporter(format, document=type(doc))
    stream = sys.stdout.buffer if reporter.binary else sys.stdout
    done = reporter.render(doc, stream, **options)
    stream.flush()
    return done.notes


def write(doc: Any, format: str | None, path: str | Path, **options: Any) -> Rendered:
    """Render ``doc`` to the file ``path`` (parent directories created); ``format`` None: by the suffix."""
    return get_reporter(format, path, document=type(doc)).render(doc, path, **options)


def text(doc: Any, format: str, **options: Any) -> str:
    """The rendering of ``doc`` by a text reporter, as a string."""
    buf = io.StringIO()
    get_reporter(format, document=type(doc)).render(doc, buf, **options)
    return buf.getvalue()
