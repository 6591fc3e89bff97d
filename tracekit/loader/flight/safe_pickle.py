"""Pickles from untrusted hands: a Flight Recorder dump is plain data, and nothing else in one is ever run.

A pickle is a program for a small stack machine, and some of its instructions import a global (``GLOBAL``,
``STACK_GLOBAL``, ``INST``, ``OBJ``, the ``EXT`` registry codes) or call one (``REDUCE``, ``NEWOBJ``, ``BUILD``'s
``__setstate__``): ``pickle.load`` on a crafted file runs whatever it names. A dump needs none of them: it is
dicts, lists, tuples, strings, bytes, numbers, booleans and None. So a pickle is read in three steps, each a
one-line :class:`UnsafePickleError` or :class:`BadPickleError` on failure:

1. it is unpickled by an ``Unpickler`` whose ``find_class`` and ``persistent_load`` raise: no global is ever
   resolved, so nothing callable is ever on the unpickler's stack and ``REDUCE``, ``NEWOBJ``, ``BUILD`` and the
   rest have nothing to call;
2. when that fails, every opcode is checked against the list of those that build plain data
   (``pickletools.genops``: decoded, not executed) to name the one that imports or calls, its byte offset and
   the global it asked for (``check_opcodes``, also usable on its own before anything is unpickled);
3. the result is walked once (no recursion) with a depth limit and a node budget: a pickle can share one list
   many times through its memo, and a tree walk of a "billion laughs" of shared lists would never end. The
   entries themselves are read by a typed conversion of fixed depth (entries.py) that visits only their known
   fields, so the walk skips inside them.

Memory while unpickling is bounded by the file size (each opcode builds at most one object); the file size is
bounded by the reader's limit.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

from ...errors import TraceFormatError

# Opcodes that build plain data only: no import, no call, no buffer protocol.
PLAIN_OPCODES = frozenset(
    {
        "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
        "NONE", "NEWTRUE", "NEWFALSE",
        "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
        "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
        "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
        "EMPTY_LIST", "APPEND", "APPENDS", "LIST",
        "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
        "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
        "EMPTY_SET", "ADDITEMS", "FROZENSET",
        "GET", "BINGET", "LONG_BINGET", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
    }
)  # fmt: skip
_NAMES_A_GLOBAL = frozenset({"GLOBAL", "INST"})  # their argument is "module name"
PLAIN_TYPES = (dict, list, tuple, str, bytes, int, float, bool, type(None), set, frozenset)

MAX_DEPTH = 32  # a dump is 6 levels deep (dump -> entries -> entry -> frames -> frame -> value)


class UnsafePickleError(TraceFormatError):
    """A pickle that would import or call something: refused, nothing in it ran."""


class BadPickleError(TraceFormatError):
    """A file that is not a readable pickle of plain data (truncated, corrupt, too deep, too many nodes)."""


class _Refused(pickle.UnpicklingError):
    pass


class _PlainUnpickler(pickle.Unpickler):
    """Resolves no global and no persistent id: with nothing callable on its stack, no opcode can run code."""

    def find_class(self, module: str, name: str):
        raise _Refused(f"the pickle asks for the global {module}.{name}")

    def persistent_load(self, pid):
        raise _Refused("the pickle asks for a persistent object")


def check_opcodes(data: bytes, source: str) -> None:
    """Refuse ``data`` unless every opcode in it builds plain data (decoded by pickletools, never executed)."""
    last = ""
    try:
        for op, arg, pos in pickletools.genops(data):
            last = op.name
            if op.name not in PLAIN_OPCODES:
                asks = f" (asks for {str(arg).replace(chr(10), ' ')[:80]})" if op.name in _NAMES_A_GLOBAL and arg else ""
                raise UnsafePickleError(
                    f"{source}: refused: the pickle holds opcode {op.name} at byte {pos}{asks}, which imports or calls "
                    "code; a Flight Recorder dump is plain data, so this file was not made by torch (nothing in it ran)"
                )
    except UnsafePickleError:
        raise
    except Exception as exc:  # ValueError for a truncated or unknown opcode, and anything the decoder meets
        raise BadPickleError(
            f"{source}: not a readable pickle ({_one_line(exc)}{f' after {last}' if last else ''}); "
            "give the file the Flight Recorder wrote (_dump_fr_trace), whole"
        ) from None


def loads_plain(data: bytes, source: str, *, max_depth: int = MAX_DEPTH, max_nodes: int | None = None) -> object:
    """The plain data a pickle holds; refuses any pickle that needs a global, and any result deeper than
    ``max_depth`` or with more than ``max_nodes`` nodes (default: 4 per byte of the file, at least a million).

    The unpickler that resolves nothing runs first (at C speed): with no global there is nothing to call, so every
    opcode that would import or call something fails in it. Only when it fails is the opcode list decoded
    (pickletools, in Python: ~50x slower), to name the opcode and its byte offset in the one-line error."""
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # _Refused, EOFError, UnpicklingError, TypeError, ...: one line, never a traceback
        check_opcodes(data, source)  # raises, naming the opcode, when the pickle holds one that imports or calls
        if isinstance(exc, _Refused):
            raise UnsafePickleError(f"{source}: refused: {exc}; a Flight Recorder dump needs none (nothing in it ran)") from None
        raise BadPickleError(f"{source}: not a readable pickle ({_one_line(exc)}); give the file whole") from None
    check_plain(value, source, max_depth=max_depth, max_nodes=max_nodes or max(4 * len(data), 1_000_000))
    return value


_CONTAINERS = frozenset({dict, list, tuple, set, frozenset})
_PLAIN = frozenset(PLAIN_TYPES)


def check_plain(value: object, source: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = 10_000_000) -> None:
    """Walk the containers of ``value`` once, without recursion: only plain types, at most ``max_depth`` levels,
    ``max_nodes`` values counted as a tree (a list shared ten times through the memo counts ten times).

    A dump's ``entries`` are the exception: each is read by a typed conversion of fixed depth
    (:mod:`.entries`, msgspec in C), which refuses anything unexpected in the fields it reads and never visits
    the others; here only their own types are checked, so the walk costs nothing per entry."""
    if type(value) not in _PLAIN:
        raise UnsafePickleError(f"{source}: refused: holds a {type(value).__name__}, not plain data")
    if isinstance(value, dict) and isinstance(value.get("entries"), list):
        entries = value["entries"]
        kinds = set(map(type, entries))
        if not kinds <= _PLAIN:
            raise UnsafePickleError(f"{source}: refused: holds a {next(iter(kinds - _PLAIN)).__name__}, not plain data")
        value = {k: v for k, v in value.items() if k != "entries"}
    stack: list[tuple[Any, int]] = [(value, 1)] if type(value) in _CONTAINERS else []
    nodes = 1
    while stack:
        item, depth = stack.pop()
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        nodes += len(children)
        if nodes > max_nodes:
            raise BadPickleError(
                f"{source}: refused: more than {max_nodes} values once shared parts are counted (a pickle bomb?); "
                "a Flight Recorder dump holds each value once"
            )
        kinds = set(map(type, children))
        if not kinds <= _PLAIN:
            bad = next(iter(kinds - _PLAIN))
            raise UnsafePickleError(f"{source}: refused: holds a {bad.__name__}, not plain data")
        if kinds & _CONTAINERS:
            if depth >= max_depth:
                raise BadPickleError(f"{source}: nested more than {max_depth} levels deep; a Flight Recorder dump is 6")
            stack.extend((c, depth + 1) for c in children if type(c) in _CONTAINERS)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
