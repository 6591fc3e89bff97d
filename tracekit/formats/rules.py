"""``--comm-rules FILE.toml``: the user's communication-kernel rules, one ``[[comm]]`` table each, as typed Structs.

``loader/classify.py`` reads the file (size-limited, UTF-8, TOML) and hands the tables here; each is converted
with msgspec into a :class:`RuleEntry` and any fault is one ConfigError line naming the file, the entry and the
field (docs/robustness.md). Whether a pattern can run (RE2, its size) is the loader's check (``patterns``)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..errors import ConfigError

MAX_RULES = 10_000
FIELDS = "pattern, library, op"


class RuleEntry(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One ``[[comm]]`` table: a regular expression searched in kernel names, the library it names, and a fixed
    collective op ("" = inferred from the name)."""

    pattern: str
    library: str = "user"
    op: str = ""


class RuleFile(msgspec.Struct, kw_only=True):
    """The file: its ``comm`` array (other top-level keys are not tracekit's and are left alone)."""

    comm: list[Any] = []


_MISSING = re.compile(r"Object missing required field `(\w+)`")
_UNKNOWN = re.compile(r"Object contains unknown field `(.*)`$")
_WRONG = re.compile(r"Expected `(\w+)`, got `(\w+)`(?: - at `\$\.(\w+)`)?$")


def rule_entries(doc: dict[str, Any], path: str) -> list[RuleEntry]:
    """The ``[[comm]]`` tables of a TOML document (``tomllib.loads``) as RuleEntry, in file order."""
    try:
        entries = msgspec.convert(doc, RuleFile).comm
    except msgspec.ValidationError:
        raise ConfigError(f"{path}: 'comm' must be an array of tables ([[comm]]), not a {type(doc['comm']).__name__}") from None
    if len(entries) > MAX_RULES:
        raise ConfigError(f"{path}: {len(entries)} [[comm]] rules (limit {MAX_RULES})")
    return [_entry(e, f"{path}: [[comm]] entry {i + 1}") for i, e in enumerate(entries)]


def _entry(entry: Any, where: str) -> RuleEntry:
    try:
        return msgspec.convert(entry, RuleEntry)
    except msgspec.ValidationError as exc:
        raise ConfigError(_said(str(exc), entry, where)) from None


def _said(msg: str, entry: Any, where: str) -> str:
    """msgspec's finding in the words the rule file's users see (and the hostile-input suite holds)."""
    if not isinstance(entry, dict):
        return f"{where}: must be a table with a string 'pattern', not a {type(entry).__name__}"
    if (m := _MISSING.match(msg)) is not None:
        return f"{where} needs a string {m.group(1)!r}"
    if (m := _UNKNOWN.match(msg)) is not None:
        return f"{where}: unknown field {m.group(1)!r} (fields: {FIELDS})"
    if (m := _WRONG.match(msg)) is not None and m.group(3):
        field, got = m.group(3), type(entry.get(m.group(3))).__name__
        if field == "pattern":
            return f"{where}, field 'pattern': the pattern must be a string, not {got}"
        return f"{where}: field {field!r} must be a string, not {got}"
    return f"{where}: {' '.join(msg.split())} (fields: {FIELDS})"
