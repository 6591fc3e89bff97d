"""Paths of the checked-in trace fixtures under tests/data."""

import os
import pathlib

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
GPU = DATA / "kineto-gpu"


def gpu_trace(name: str) -> str:
    return os.fspath(GPU / name)
