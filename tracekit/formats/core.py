"""Reading and writing tracekit's own documents: one decoder and one encoder for all of them.

Every document (summary, gate verdict, timeline, ...) is a typed msgspec Struct with a schema string
``tracekit.<name>/<major>``. Decoding goes through :func:`decode` (bytes) or :func:`read` (a file), which

- accept the major version they know and any minor revision of it (``tracekit.summary/1`` and
  ``tracekit.summary/1.3``), and refuse every other schema with a line that says how to produce the right one;
- refuse ``NaN`` and ``Infinity`` (not JSON; Python's json writes them), numbers out of a field's range and
  documents nested deeper than the interpreter can decode, as one line naming the file and the field;
- read regular files only, inflate ``.gz`` (by magic bytes, not the name) as the bytes stream, and stop at a size
  limit instead of exhausting memory.

:func:`encode` never writes NaN: non-finite floats become ``null``.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zlib
from typing import Any, TypeVar

import msgspec

from ..errors import TracekitError
from ..runtime.env import env_limit

T = TypeVar("T")

# Documents are small next to traces: a 5 M-event summary is under 1 GB. Raise with TRACEKIT_MAX_DOCUMENT_BYTES.
DEFAULT_MAX_DOCUMENT_BYTES = int(env_limit("TRACEKIT_MAX_DOCUMENT_BYTES", 2**30))  # 'abc': exit 2, no traceback
_CHUNK = 4 * 2**20
# A gzip'ed document inflating more than this many times its compressed size, once past the floor, is refused as
# it inflates (the trace reader's rule): a 1 MB file of 1 GiB of blanks took 12 s and 1.2-2.2 GB before.
_MAX_RATIO = env_limit("TRACEKIT_MAX_GZIP_RATIO", 200)
_RATIO_FLOOR = 16 * 2**20


def family_major(schema: str) -> tuple[str, int]:
    """``"tracekit.summary/1"`` -> ``("tracekit.summary", 1)``."""
    family, _, major = schema.partition("/")
    return family, int(major)


def schema_accepted(value: object, family: str, major: int) -> bool:
    """The version policy, in one place: ``family/major`` itself or any minor revision ``family/major.x``."""
    if not isinstance(value, str) or not value.startswith(f"{family}/"):
        return False
    version = value[len(family) + 1 :]
    head, _, minor = version.partition(".")
    return head == str(major) and (not _ or minor.isdigit())


def decode(
    data: bytes, type_: type[T], *, source: str, error: type[TracekitError], fix: str, schema: tuple[str, int] | None = None
) -> T:
    """``data`` as ``type_``; any fault is ``error`` with one line: the source, what is wrong and where (the
    JSON path msgspec reports, e.g. ``$.ranks[0].rank``), and ``fix``. With ``schema=(family, major)``, a
    document whose ``schema`` is not accepted is refused first, under that name."""
    return decode_with_raw(data, type_, source=source, error=error, fix=fix, schema=schema)[0]


def decode_with_raw(
    data: bytes, type_: type[T], *, source: str, error: type[TracekitError], fix: str, schema: tuple[str, int] | None = None
) -> tuple[T, Any]:
    """As :func:`decode`, and also the document as plain builtins exactly as the file has it (absent keys
    absent), validated by the same Struct: for a reader that must write the document back unchanged."""
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise error(f"{source}: not valid JSON ({one_line(exc)}; NaN and Infinity are not JSON); {fix}") from None
    except msgspec.ValidationError as exc:  # a number no float holds, such as 1e400
        raise error(f"{source}: {one_line(exc)}; {fix}") from None
    except RecursionError:
        raise error(f"{source}: JSON nested too deeply to read; {fix}") from None
    return convert(raw, type_, source=source, error=error, fix=fix, schema=schema), raw


def convert(
    raw: Any, type_: type[T], *, source: str, error: type[TracekitError], fix: str, schema: tuple[str, int] | None = None
) -> T:
    """Builtins already decoded (JSON, or a TOML file's tables) as ``type_``, with :func:`decode`'s one-line
    errors: the source, the JSON path of the field (``$.comm[0].pattern``) and ``fix``."""
    try:
        return msgspec.convert(raw, type_)
    except msgspec.ValidationError as exc:
        found = raw.get("schema") if isinstance(raw, dict) else None
        if schema is not None and not schema_accepted(found, *schema):
            raise error(f"{source}: schema is {found!r}, expected {schema[0]}/{schema[1]!r}; {fix}") from None
        raise error(f"{source}: {one_line(exc)}; {fix}") from None
    except RecursionError:
        raise error(f"{source}: JSON nested too deeply to read; {fix}") from None


def read(
    path: str | os.PathLike,
    type_: type[T],
    *,
    error: type[TracekitError],
    fix: str,
    max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    schema: tuple[str, int] | None = None,
) -> T:
    """The document in the file at ``path`` (plain or gzip JSON) as ``type_``."""
    return decode(
        read_bytes(path, error=error, max_bytes=max_bytes), type_, source=os.fspath(path), error=error, fix=fix, schema=schema
    )


def read_bytes(
    path: str | os.PathLike,
    *,
    error: type[TracekitError],
    max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    limit_read: int | None = None,
) -> bytes:
    """A regular file's bytes, gzip inflated chunk by chunk, refused past ``max_bytes`` (inflated). With
    ``limit_read``: only the first ``limit_read`` inflated bytes (to sniff what a file is), never refused."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{name}: not a regular file (a FIFO, device, socket or directory); give a JSON file")
        with open(name, "rb", opener=_nonblocking) as fh:
            return _inflate(fh, name, error, max_bytes, limit_read)
    except OSError as exc:
        raise error(f"{name}: cannot read ({exc.strerror or exc}); check the path and permissions") from None


def _nonblocking(name: str, flags: int) -> int:
    """Open without blocking, so a file that became a FIFO after the check cannot hang the read."""
    return os.open(name, flags | getattr(os, "O_NONBLOCK", 0))


def _inflate(fh, name: str, error: type[TracekitError], max_bytes: int, limit_read: int | None) -> bytes:
    data = fh.read(_CHUNK if limit_read is None else min(_CHUNK, limit_read))
    gz = data[:2] == b"\x1f\x8b"
    out = bytearray()
    d = None
    consumed = 0  # compressed bytes inflated so far
    while data:
        if not gz:
            out += data
        else:
            d = d or zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out += d.decompress(data, min(_CHUNK, max_bytes + 1 - len(out)))  # in steps: the ratio below
                consumed = fh.tell() - len(d.unconsumed_tail) - (len(d.unused_data) if d.eof else 0)
            except zlib.error as exc:
                raise error(f"{name}: corrupt gzip data ({exc}); re-copy the file") from None
        if limit_read is not None and len(out) >= limit_read:
            return bytes(out[:limit_read])
        if len(out) > max_bytes:
            raise error(
                f"{name}: more than {max_bytes:,} bytes (inflated); not a tracekit document, or raise the "
                "limit with TRACEKIT_MAX_DOCUMENT_BYTES"
            )
        if gz and len(out) > _RATIO_FLOOR and len(out) > _MAX_RATIO * consumed:
            raise error(
                f"{name}: {consumed:,} gzip'ed bytes inflate past {len(out):,} (more than {_MAX_RATIO:g}x: a "
                "gzip bomb?); raise the ratio with TRACEKIT_MAX_GZIP_RATIO if it is genuine"
            )
        if d is not None and d.eof:  # the next bytes, if any, are another gzip member
            data, d = d.unused_data, None
        elif d is not None and d.unconsumed_tail:
            data = d.unconsumed_tail
        else:
            data = b""
        data = data or fh.read(_CHUNK)
    if d is not None and not d.eof and limit_read is None:
        raise error(f"{name}: the gzip data ends early (a truncated copy?); re-copy the file")
    return bytes(out)


def dumps(obj: Any, indent: int | None = 1, sort_keys: bool = False) -> str:
    """JSON text as ``json.dumps(obj, indent=indent)`` writes it, except that NaN and ±Infinity become ``null``
    (Python's json writes the tokens ``NaN``/``Infinity``, which no JSON parser accepts)."""
    return json.dumps(_finite(obj), indent=indent, allow_nan=False, sort_keys=sort_keys)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def encode(obj: Any) -> bytes:
    """JSON bytes of a Struct or builtins; NaN and ±Infinity are written as ``null``. A lone surrogate (a file
    name that is not UTF-8, as ``os.fsdecode`` gives it) is written as its escape text (``\\udcff``): msgspec
    refuses it with a UnicodeEncodeError, a traceback from every command that records the trace's path."""
    try:
        return msgspec.json.encode(obj)
    except UnicodeEncodeError:
        return msgspec.json.encode(_mend_surrogates(obj))


def _mend_surrogates(obj: Any) -> Any:
    if isinstance(obj, str):
        return obj.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(obj, msgspec.Struct):
        obj = msgspec.to_builtins(obj)
    if isinstance(obj, dict):
        return {_mend_surrogates(k): _mend_surrogates(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_mend_surrogates(v) for v in obj]
    return obj


def encode_text(obj: Any, indent: int | None = 1) -> str:
    """:func:`encode` as text, laid out with ``indent`` spaces a level (None or 0: one line), as a document
    tracekit writes for people and other tools to read (``check --json``, ``diff --format json``)."""
    data = encode(obj)
    return (msgspec.json.format(data, indent=indent) if indent else data).decode("utf-8")


def to_builtins(obj: Any) -> Any:
    """A Struct as dicts and lists, fields left at their defaults omitted (so absent stays absent)."""
    return msgspec.to_builtins(obj)


def one_line(exc: Exception) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())


def short_repr(value: Any) -> str:
    """A value as a warning quotes it: scalars by repr (cut at 40 characters), containers by their type."""
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) else f"a {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests lists/dicts more than ``limit`` levels (iterative: no recursion to exhaust)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d >= limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False
