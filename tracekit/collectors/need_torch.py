"""The one check that torch is there, made before a collector imports it: ``pip install tracekit`` reads, analyses,
reports and gates saved traces without torch; recording needs the ``collect`` extra or the user's own build."""

from __future__ import annotations

from ..errors import MissingDependencyError

INSTALL_HINT = "pip install 'tracekit[collect]', or bring your own torch>=2.1 build (CPU or CUDA)"


def require_torch(what: str) -> None:
    """Raise a one-line MissingDependencyError (exit code 4) naming ``what`` and the fix when torch cannot be
    imported; otherwise import it (the caller is about to)."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            f"{what} records a run with PyTorch, which is not installed here ({exc}); {INSTALL_HINT}"
        ) from None
