"""Limits from the environment (TRACEKIT_MAX_TRACE_BYTES, TRACEKIT_MAX_DOCUMENT_BYTES, ...), read at import.

A value that is not a positive number is remembered, the default used, and the problem reported by
``check_env`` as one ConfigError line (exit 2) when a command starts: raised at import it would be a ValueError
traceback from every command, before the CLI can turn an error into one line.
"""

from __future__ import annotations

import os

from ..errors import ConfigError

_ENV_PROBLEMS: list[str] = []


def env_limit(name: str, default: float) -> float:
    """A positive finite number from the environment variable ``name``, else ``default``."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        _ENV_PROBLEMS.append(f"{name}={text[:40]!r}: expected a positive number")
        return default
    return value


def check_env() -> None:
    if _ENV_PROBLEMS:  # each variable once (two modules may read the same one), all in the one line
        raise ConfigError("; ".join(dict.fromkeys(_ENV_PROBLEMS)))
