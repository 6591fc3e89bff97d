"""Pickles from untrusted hands: a Flight Recorder dump is plain data, and nothing else in one is ever run.

A pickle is a program for a small stack machine, and some of its instructions import a global (``GLOBAL``,
``STACK_GLOBAL``, ``INST``, ``OBJ``, the ``EXT`` registry codes) or call one (``REDUCE``, ``NEWOBJ``, ``BUILD``'s
``__setstate__``): ``pickle.load`` on a crafted file runs whatever it names. A dump needs none of them: it is
dicts, lists, tuples, strings, bytes, numbers, booleans and None. So a pickle is read in three steps, each a
one-line :class:`UnsafePickleError` or :class:`BadPickleError` on failure:

1. every opcode is checked against the list of those that build plain data (``pickletools.genops``: the
   opcodes are decoded, not executed), so a dump holding ``GLOBAL``/``REDUCE`` is refused before anything is
   built, naming the opcode, its byte offset and the global it asked for;
2. only then is it unpickled, by an ``Unpickler`` whose ``find_class`` and ``persistent_load`` raise: a second
   wall, should an opcode ever slip past the first;
3. the result is walked once (no recursion) with a depth limit and a node budget: a pickle can share one list
   many times through its memo, and a tree walk of a "billion laughs" of shared lists would never end.

Memory while unpickling is bounded by the file size (each opcode builds at most one object); the file size is
bounded by the reader's limit.
"""

from __future__ import annotations

import io
import pickle
import pickletools

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
    """Resolves no global and no persistent id: the second wall behind the opcode check."""

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
    ``max_depth`` or with more than ``max_nodes`` nodes (default: 4 per byte of the file, at least a million)."""
    check_opcodes(data, source)
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except _Refused as exc:
        raise UnsafePickleError(f"{source}: refused: {exc}; a Flight Recorder dump needs none (nothing in it ran)") from None
    except Exception as exc:  # EOFError, UnpicklingError, ValueError, MemoryError, ...: one line, never a traceback
        raise BadPickleError(f"{source}: not a readable pickle ({_one_line(exc)}); give the file whole") from None
    check_plain(value, source, max_depth=max_depth, max_nodes=max_nodes or max(4 * len(data), 1_000_000))
    return value


def check_plain(value: object, source: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = 10_000_000) -> None:
    """Walk ``value`` once, without recursion: only plain types, at most ``max_depth`` levels, ``max_nodes``
    nodes counted as a tree (a list shared ten times through the memo counts ten times)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    nodes = 1
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, PLAIN_TYPES):
            raise UnsafePickleError(f"{source}: refused: holds a {type(item).__name__}, not plain data")
        if not isinstance(item, (dict, list, tuple, set, frozenset)) or not item:
            continue
        if depth >= max_depth:
            raise BadPickleError(f"{source}: nested more than {max_depth} levels deep; a Flight Recorder dump is 6")
        nodes += 2 * len(item) if isinstance(item, dict) else len(item)
        if nodes > max_nodes:
            raise BadPickleError(
                f"{source}: refused: more than {max_nodes} values once shared parts are counted (a pickle bomb?); "
                "a Flight Recorder dump holds each value once"
            )
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
