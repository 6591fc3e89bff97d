"""Collectors: ``tracekit.profile``, annotated collectives, the parallel layout, the run manifest, workloads."""

from .profile import ProfileOverhead, profile

__all__ = ["ProfileOverhead", "profile"]
