"""Options shared by the commands that load traces, and the option types every command's numbers go through."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ..loader.loading import LoadOptions


def load_options(f):
    """--comm-pattern, --comm-rules, --no-cache, --cache-dir, --executor, --max-trace-bytes, --max-string-bytes."""
    f = click.option(
        "--max-string-bytes",
        type=click.IntRange(min=1),
        default=None,
        help="Refuse traces holding a single string (event name, ...) longer than this (default 1 MiB); "
        "also bounds runs of whitespace (about this long) and of bytes without a '\"' (4x, at least "
        "16 MiB), refused as the bytes stream.",
    )(f)
    f = click.option(
        "--max-trace-bytes",
        type=click.IntRange(min=1),
        default=None,
        help="Refuse traces that inflate past this many bytes (default 8 GiB), and .gz traces that inflate "
        "more than 200x past 16 MiB (TRACEKIT_MAX_GZIP_RATIO).",
    )(f)
    f = click.option("--executor", default=None, help="Where ranks load: 'serial', 'process' (default) or 'dask://HOST:PORT'.")(f)
    f = click.option(
        "--cache-dir",
        default=None,
        help="Cache directory (default: $TRACEKIT_CACHE_DIR, else $XDG_CACHE_HOME/tracekit, else ~/.cache/tracekit; "
        "never the trace's folder).",
    )(f)
    f = click.option("--no-cache", is_flag=True, help="Neither read nor write the Parquet cache (nor analyze's analysis cache).")(
        f
    )
    f = click.option(
        "--comm-rules", type=click.Path(dir_okay=False), default=None, help="TOML file of extra [[comm]] classification rules."
    )(f)
    f = click.option(
        "--comm-pattern", multiple=True, metavar="REGEX", help="Extra kernel-name regex that marks communication (repeatable)."
    )(f)
    return f


def build_load_options(
    comm_pattern=(), comm_rules=None, no_cache=False, cache_dir=None, max_trace_bytes=None, max_string_bytes=None, **_ignored
) -> LoadOptions:
    from ..loader.classify import RuleSet, load_rules_toml
    from ..loader.loading import LoadOptions

    rules = load_rules_toml(comm_rules) if comm_rules else RuleSet()
    rules = rules.with_patterns(comm_pattern) if comm_pattern else rules
    limits = {k: v for k, v in (("max_bytes", max_trace_bytes), ("max_string_bytes", max_string_bytes)) if v}
    return LoadOptions(rules=rules, cache=not no_cache, cache_dir=cache_dir, **limits)


def input_files(paths) -> list[str]:
    """The trace files a command will read from ``paths`` (directories listed), for ``check_output`` to refuse
    an output that would overwrite one; a path that lists nothing gives nothing here (the load reports it)."""
    from ..errors import TracekitError
    from ..loader.paths import find_traces

    try:
        return find_traces([str(p) for p in paths])
    except (TracekitError, OSError, ValueError):
        return []


class FiniteFloat(click.ParamType):
    """A float option (click's FLOAT or a FloatRange, kept as ``inner`` for its bounds and help) that refuses NaN
    and ±inf: ``--min-delta-ratio nan`` compared false with every threshold and turned a regression into "ok";
    ``inf`` read as "no limit"; ``1e999`` is inf. Exit 2, as every other bad option value."""

    name = "float"

    def __init__(self, inner: click.ParamType):
        self.inner = inner

    def convert(self, value, param, ctx):
        number = self.inner.convert(value, param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number

    def get_metavar(self, param, *args, **kwargs):
        return self.inner.get_metavar(param, *args, **kwargs)

    def to_info_dict(self):
        return self.inner.to_info_dict()

    def __repr__(self) -> str:
        return f"FiniteFloat({self.inner!r})"


def finite_numbers(cmd):
    """Every float option of ``cmd`` and of its subcommands refuses NaN and infinities (``FiniteFloat``): one place,
    so an option added later with ``type=float`` is covered too (tests/unit/cli walks every command's options)."""
    for param in getattr(cmd, "params", ()):
        if isinstance(param.type, click.types.FloatParamType):  # FLOAT, and FloatRange (a subclass)
            param.type = FiniteFloat(param.type)
    for sub in getattr(cmd, "commands", {}).values():
        finite_numbers(sub)
    return cmd
