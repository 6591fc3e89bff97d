"""The loader: trace files (Kineto/Chrome-trace JSON, plain or gzip) -> TraceSet. The only package that reads
the trace format: decode, stream, columnar building, event kinds, linking, rank info, checks, classification
rules, the Parquet cache and the executors that load ranks in parallel.

Names are imported on first use (PEP 562): a command that reads only a small part of the loader (the safe file
opening, say) does not import pandas with the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from .classify import RuleSet, load_rules_toml
    from .loading import LoadOptions, load, load_file
    from .paths import find_traces

_LAZY = {
    "RuleSet": ".classify",
    "load_rules_toml": ".classify",
    **{n: ".loading" for n in ("LoadOptions", "load", "load_file")},
    "find_traces": ".paths",
}

__all__ = ["LoadOptions", "RuleSet", "find_traces", "load", "load_file", "load_rules_toml"]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
