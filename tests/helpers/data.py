"""Paths of the checked-in trace fixtures under tests/data."""

import os
import pathlib

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
GPU = DATA / "kineto-gpu"
# The full HTA trace set, when the checkout sits next to one.
SHARED = pathlib.Path(__file__).resolve().parents[2].parent.parent / "shared" / "traces" / "kineto-gpu"


def gpu_trace(name: str) -> str:
    return os.fspath(GPU / name)


def real_trace(name: str) -> pathlib.Path:
    """A real GPU trace from tests/data/kineto-gpu (or ../shared/traces when present)."""
    (path,) = [p for p in (SHARED if SHARED.is_dir() else GPU).glob("*.json.gz") if p.name.startswith(name)]
    return path
