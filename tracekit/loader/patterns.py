"""User regular expressions (``--comm-pattern``, ``[[comm]]`` rule files) compiled with RE2: linear-time matching.

Python's ``re`` backtracks: ``(.*a){20}$`` takes hours on one long kernel name, and tracekit matches every
unique kernel name of a trace. RE2 (``google-re2``, imported lazily) runs any pattern it accepts in time linear
in the name. Where RE2 cannot express a pattern (backreferences, lookaround), the ``regex`` module runs it (a
backtracking engine, like the standard library's, but one that takes a timeout): each search is stopped after
``MATCH_TIMEOUT_S`` and the pattern is refused in one line, so no pattern hangs a command; a warning says which
engine runs it. Without ``regex`` installed, the standard library runs it unprotected, and the warning says so.
Patterns are limited in size, and RE2's compiled program in memory, so a 50 MB pattern is refused instead of
taking gigabytes.

A rule table (the shipped communication and kernel-class rules, with the user's before them) runs as one
``FirstMatch``: every pattern RE2 accepts in one ``RE2::Set``, a single pass over the name, the first matching
rule winning; a name longer than ``MAX_MATCH_CHARS`` is matched on its first ``MAX_MATCH_CHARS`` characters
(what tells kernels apart is their leading function name and template arguments; a 1 MiB name is noise or an
attack), so one name costs a bounded time whatever its length.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Protocol

from ..errors import ConfigError

MAX_PATTERN_BYTES = 64 * 1024  # a kernel-name pattern is a few dozen bytes
RE2_MAX_MEM = 64 * 1024**2  # RE2's budget for one compiled pattern
MATCH_TIMEOUT_S = 0.5  # one search of one kernel name by a backtracking pattern; a real one takes microseconds
MAX_MATCH_CHARS = 16 * 1024  # rule tables read this much of a name; real demangled kernel names are shorter


class Matcher(Protocol):
    def search(self, text: str) -> Any: ...


class _Re2Matcher:
    """RE2 on text that may hold lone surrogates (which UTF-8, and so RE2, cannot carry): those become U+FFFD."""

    __slots__ = ("_regex",)

    def __init__(self, regex: Any):
        self._regex = regex

    def search(self, text: str) -> Any:
        try:
            return self._regex.search(text)
        except UnicodeEncodeError:
            return self._regex.search(text.encode("utf-8", "replace").decode("utf-8"))


class _TimedMatcher:
    """A backtracking pattern (``regex`` module) whose every search stops after MATCH_TIMEOUT_S: a ConfigError
    naming the pattern and the name it choked on, instead of a command that never ends."""

    __slots__ = ("_regex", "_pattern")

    def __init__(self, regex: Any, pattern: str):
        self._regex, self._pattern = regex, pattern

    def search(self, text: str) -> Any:
        try:
            return self._regex.search(text, timeout=MATCH_TIMEOUT_S)
        except TimeoutError:
            name = text if len(text) <= 60 else text[:57] + "..."
            raise ConfigError(
                f"pattern {self._pattern[:60]!r}: one search of the name {name!r} ran past "
                f"{MATCH_TIMEOUT_S} s (catastrophic backtracking); rewrite it without nested repeats, "
                "or without backreferences and lookaround so that RE2 runs it in linear time"
            ) from None


def _regex() -> Any:
    try:
        import regex
    except ImportError:
        return None
    return regex


def _re2() -> Any:
    try:
        import re2
    except ImportError:
        return None
    return re2


@functools.lru_cache(maxsize=256)  # the built-in rules and a few user ones; bounded memory
def compile_pattern(pattern: str) -> tuple[Matcher, str]:
    """(matcher, engine) for a pattern already checked by ``check_pattern``; engine is "re2" or "re"."""
    re2 = _re2()
    if re2 is not None:
        options = re2.Options()
        options.log_errors = False  # RE2 would print its parse errors on stderr
        options.max_mem = RE2_MAX_MEM
        try:
            return _Re2Matcher(re2.compile(pattern, options)), "re2"
        except re2.error:
            pass
    rx = _regex()
    if rx is not None:
        try:
            return _TimedMatcher(rx.compile(pattern), pattern), "regex"
        except rx.error:
            pass  # a pattern only the standard library reads: checked by check_pattern, run unprotected
    return re.compile(pattern), "re"


class FirstMatch:
    """The index of the first of ``patterns`` found in a name (-1 for none), on the first ``MAX_MATCH_CHARS``
    characters. The patterns RE2 runs go into one RE2 set (one pass for all of them); any other (a user's
    backreference) is searched on its own engine, only when it could still come first."""

    __slots__ = ("_set", "_set_index", "_others")

    def __init__(self, patterns: tuple[str, ...]):
        re2 = _re2()
        self._set: Any = None
        self._set_index: list[int] = []
        self._others: list[tuple[int, Matcher]] = []
        if re2 is not None:
            options = re2.Options()
            options.log_errors = False
            options.max_mem = RE2_MAX_MEM
            self._set = re2.Set.SearchSet(options)
        compiled = [compile_pattern(p) for p in patterns]
        for i, (p, (matcher, engine)) in enumerate(zip(patterns, compiled)):
            if engine == "re2" and self._set is not None and _added(self._set, p):
                self._set_index.append(i)
            else:
                self._others.append((i, matcher))
        if self._set is not None and not (self._set_index and _compiled(self._set)):
            self._set, self._set_index = None, []  # each pattern on its own, as before the set existed
            self._others = list(enumerate(m for m, _ in compiled))

    def __call__(self, name: str) -> int:
        text = name[:MAX_MATCH_CHARS]
        best = -1
        if self._set is not None:
            hits = _set_match(self._set, text)
            best = min((self._set_index[h] for h in hits), default=-1)
        for i, matcher in self._others:
            if best != -1 and i > best:
                break
            if matcher.search(text):
                return i
        return best


def _added(rset: Any, pattern: str) -> bool:
    try:
        rset.Add(pattern)
        return True
    except Exception:  # re2.error: the set refuses what re2.compile took (should not happen; then on its own)
        return False


def _compiled(rset: Any) -> bool:
    try:
        rset.Compile()
        return True
    except Exception:  # re2.error: the set's program is over RE2_MAX_MEM
        return False


def _set_match(rset: Any, text: str) -> list[int]:
    try:
        return rset.Match(text) or []
    except UnicodeEncodeError:  # a lone surrogate: what UTF-8 cannot carry becomes U+FFFD
        return rset.Match(text.encode("utf-8", "replace").decode("utf-8")) or []


def check_pattern(pattern: Any, where: str) -> str | None:
    """Refuse (ConfigError naming ``where``) a pattern that is not a string, too long, or invalid in both engines.
    Returns a warning when it runs on the standard library's backtracking engine, else None."""
    if not isinstance(pattern, str):
        raise ConfigError(f"{where}: the pattern must be a string, not {type(pattern).__name__}")
    size = len(pattern.encode("utf-8", "surrogatepass"))
    if size > MAX_PATTERN_BYTES:
        raise ConfigError(
            f"{where}: a pattern of {size} bytes (limit {MAX_PATTERN_BYTES}); a kernel-name rule is a short regular expression"
        )
    re2 = _re2()
    why = "google-re2 is not installed"
    if re2 is not None:
        options = re2.Options()
        options.log_errors = False
        options.max_mem = RE2_MAX_MEM
        try:
            re2.compile(pattern, options)
            return None
        except re2.error as exc:
            why = _text(exc)
            if "too large" in why or "too big" in why:
                raise ConfigError(f"{where}: pattern too large for the regex engine ({why}); simplify it") from None
        except UnicodeEncodeError:
            raise ConfigError(f"{where}: the pattern holds characters that are not valid Unicode") from None
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ConfigError(f"{where}: not a valid regular expression ({exc})") from None
    rx = _regex()
    if rx is not None:
        try:
            rx.compile(pattern)
            return (
                f"{where}: the pattern needs a backtracking regex engine (RE2: {why}); it runs on the regex "
                f"module, each search stopped after {MATCH_TIMEOUT_S} s (RE2 runs all but backreferences, "
                "lookaround, \\Z and counted repeats over 1000, in linear time)"
            )
        except (rx.error, RecursionError, OverflowError):
            pass
    return (
        f"{where}: the pattern needs Python's backtracking regex engine (RE2: {why}); matching it is "
        "not protected against catastrophic backtracking (RE2 runs all but backreferences, lookaround, \\Z "
        "and counted repeats over 1000)"
    )


def _text(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)
