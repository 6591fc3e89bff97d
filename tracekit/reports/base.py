"""The Reporter protocol: render one typed document to a text or a binary stream.

A reporter names its ``format`` (what ``--format`` selects), the file ``suffix`` that selects it when no format
is given, whether it writes bytes (``binary``) and the ``document`` type it renders. ``render(doc, out)``
takes an open stream, or a path that it opens (creating the parent directory) in the right mode. It returns
a Rendered: where it wrote, how much, and the notes a CLI repeats on stderr (downsampling, degraded input).
Reporters only arrange and format what the document holds; they never measure.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, Protocol

from ..errors import ConfigError
from ..formats.contract import SUMMARY_SCHEMA
from ..formats.core import family_major, schema_accepted
from ..runtime.outputs import check_output, write_output

Output = IO[Any] | Path | str


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a reporter wrote (``path`` None for a stream it was given), its size, and notes for stderr."""

    path: Path | None
    size_bytes: int
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"path": None if self.path is None else str(self.path), "size_bytes": self.size_bytes, "notes": list(self.notes)}


class Reporter(Protocol):
    @property
    def format(self) -> str:
        """What ``--format`` names: "table", "json", "html", ..."""

    @property
    def suffix(self) -> str:
        """The file-name ending that selects it (".html"), or "" when none does."""

    @property
    def binary(self) -> bool:
        """Writes bytes, else text."""

    @property
    def document(self) -> type:
        """The type of document it renders."""

    def render(self, doc: Any, out: Output, **options: Any) -> Rendered:
        """Write ``doc`` to the stream or file ``out``."""
        ...


class StreamReporter:
    """The shared half of every reporter: ``render`` opens a path when given one; subclasses implement
    ``write(doc, stream, **options) -> notes``."""

    format: ClassVar[str] = ""
    suffix: ClassVar[str] = ""
    binary: ClassVar[bool] = False
    document: ClassVar[type] = object

    def check(self, doc: Any) -> None:
        """Refuse a document this reporter cannot render (before anything is written)."""
        if not isinstance(doc, self.document):
            raise ConfigError(f"{self.format} reporter: cannot render a {type(doc).__name__}")

    def write(self, doc: Any, stream: IO[Any], **options: Any) -> tuple[str, ...]:
        raise NotImplementedError

    def render(self, doc: Any, out: Output, **options: Any) -> Rendered:
        self.check(doc)
        if not isinstance(out, (str, os.PathLike)):
            return Rendered(None, 0, self.write(doc, out, **options))
        path = check_output(out)  # a bad path fails before the rendering
        if self.binary:  # all of it first: nothing half-written on an error
            data = io.BytesIO()
            notes = self.write(doc, data, **options)
            encoded = data.getvalue()
        else:
            text = io.StringIO()
            notes = self.write(doc, text, **options)
            encoded = text.getvalue().encode("utf-8")
        write_output(path, encoded)  # the size written, also for /dev/null or a FIFO, whose stat says 0
        return Rendered(path, len(encoded), notes)

    def text(self, doc: Any, **options: Any) -> str:
        """The rendering of a text reporter as a string."""
        buf = io.StringIO()
        self.render(doc, buf, **options)
        return buf.getvalue()


def check_summary(summary: Any) -> None:
    """A summary the reporters can render: ``tracekit.summary/1`` or a minor revision of it (formats.core's one
    version policy, as ``read_summary`` applies it)."""
    if not isinstance(summary, Mapping) or not schema_accepted(summary.get("schema"), *family_major(SUMMARY_SCHEMA)):
        got = summary.get("schema") if isinstance(summary, Mapping) else type(summary).__name__
        raise ConfigError(f"summary: schema {got!r} is not {SUMMARY_SCHEMA!r}; produce it with `tracekit analyze --format json`")
