"""Collectors: ``tracekit.profile``, annotated collectives, the parallel layout, the run manifest, workloads.

Imported lazily: the analyzers read collector result formats (activation_result) without importing torch."""

from __future__ import annotations

__all__ = ["ProfileOverhead", "profile"]


def __getattr__(name: str):
    if name in __all__:
        from . import profile as _profile_module

        return getattr(_profile_module, name)
    raise AttributeError(f"module 'tracekit.collectors' has no attribute {name!r}")
