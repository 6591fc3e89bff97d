"""User regular expressions (``--comm-pattern``, ``[[comm]]`` rule files) compiled with RE2: linear-time matching.

Python's ``re`` backtracks: ``(.*a){20}$`` takes hours on one long kernel name, and tracekit matches every
unique kernel name of a trace. RE2 (``google-re2``, imported lazily) runs any pattern it accepts in time linear
in the name. Where RE2 cannot express a pattern (backreferences, lookaround), the ``regex`` module runs it (a
backtracking engine, like the standard library's, but one that takes a timeout): each search is stopped after
``MATCH_TIMEOUT_S`` and the pattern is refused in one line, so no pattern hangs a command; a warning says which
engine runs it. Without ``regex`` installed, the standard library runs it unprotected, and the warning says so.
Patterns are limited in size, and RE2's compiled program in memory, so a 50 MB pattern is refused instead of
taking gigabytes.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Protocol

from ..errors import ConfigError

MAX_PATTERN_BYTES = 64 * 1024  # a kernel-name pattern is a few dozen bytes
RE2_MAX_MEM = 64 * 1024**2  # RE2's budget for one compiled pattern
MATCH_TIMEOUT_S = 0.5  # one search of one kernel name by a backtracking pattern; a real one takes microseconds


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
