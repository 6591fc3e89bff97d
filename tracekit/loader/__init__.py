"""The loader: trace files (Kineto/Chrome-trace JSON, plain or gzip) -> TraceSet. The only package that reads
the trace format: decode, stream, columnar building, event kinds, linking, rank info, checks, classification
rules, the Parquet cache and the executors that load ranks in parallel."""

from .classify import RuleSet, load_rules_toml
from .io import LoadOptions, find_traces, load, load_file

__all__ = ["LoadOptions", "RuleSet", "find_traces", "load", "load_file", "load_rules_toml"]
