"""The tracks document of `tracekit annotate --tracks FILE`: ``{"track name": [[start_us, end_us], ...]}``, times in
µs in the trace's own time base. Read through :func:`tracekit.formats.core.read`: NaN, Infinity, a number no float
holds, a wrong shape or an interval that ends before it starts is refused as one line."""

from __future__ import annotations

import math
import os

import msgspec

from ..errors import ConfigError
from .core import read

_FIX = 'give {"track name": [[start_us, end_us], ...]} with finite times, each end at or after its start'


class Interval(msgspec.Struct, array_like=True, frozen=True):
    """One ``[start_us, end_us]`` pair."""

    start_us: float
    end_us: float


Tracks = dict[str, list[Interval]]


def read_tracks(path: str | os.PathLike) -> dict[str, list[list[float]]]:
    """The tracks in ``path`` as ``{name: [[start_us, end_us], ...]}``."""
    tracks = read(path, Tracks, error=ConfigError, fix=_FIX)
    for name, intervals in tracks.items():
        for i, iv in enumerate(intervals):
            if not (math.isfinite(iv.start_us) and math.isfinite(iv.end_us) and iv.end_us >= iv.start_us):
                raise ConfigError(
                    f"{os.fspath(path)}: track {name!r} interval {i} is [{iv.start_us}, {iv.end_us}]: "
                    f"not a finite interval; {_FIX}"
                )
    return {name: [[iv.start_us, iv.end_us] for iv in intervals] for name, intervals in tracks.items()}
