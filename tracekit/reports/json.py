"""The JSON reporter: any document that is a mapping or has ``to_dict()`` (a summary, the gate's verdict, a diff,
`tracekit info`, the memory model, a timeline record), written as it is, so another tool can read it. A document
with ``to_struct()`` (the verdict, the diff) is written from its formats Struct by formats.core's encoder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from ..errors import ConfigError
from ..formats import core
from .base import StreamReporter


def as_json_data(doc: Any) -> Any:
    if isinstance(doc, Mapping):
        return doc
    to_dict = getattr(doc, "to_dict", None)
    if to_dict is None:
        raise ConfigError(f"json reporter: a {type(doc).__name__} has no to_dict()")
    return to_dict()


class JsonReporter(StreamReporter):
    """Options: ``indent`` (1; None for one line), ``sort_keys`` (False), ``allow_nan`` (True; False refuses
    NaN), ``newline`` (True: end with a newline)."""

    format = "json"
    suffix = ".json"
    document = object

    def check(self, doc: Any) -> None:
        as_json_data(doc)

    def write(
        self,
        doc: Any,
        stream: IO[Any],
        *,
        indent: int | None = 1,
        sort_keys: bool = False,
        allow_nan: bool = True,
        newline: bool = True,
        **_: Any,
    ) -> tuple[str, ...]:
        to_struct = getattr(doc, "to_struct", None)
        if to_struct is not None and not sort_keys:  # a typed document (verdict, diff): the one encoder, no NaN
            text = core.encode_text(to_struct(), indent=indent)
        else:
            text = json.dumps(as_json_data(doc), indent=indent, sort_keys=sort_keys, allow_nan=allow_nan)
        stream.write(text + "\n" if newline else text)
        return ()
