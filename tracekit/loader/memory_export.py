"""torch.profiler's raw memory timeline (``prof.export_memory_timeline("x.raw.json.gz", device)``) as a tracekit
input: a JSON list of ``[timestamp_ns, action, bytes, category]`` for one device, ``-1`` as the timestamp of the
tensors that existed before profiling began (torch/profiler/_memory_profiler.py, ``export_memory_timeline_raw``).

The file names neither its device nor its categories, so the tables below are torch's (``Action`` is numbered from
1, ``_CATEGORY_TO_INDEX`` follows ``_CATEGORY_TO_COLORS``, 7 being "no category"). Anything else (another JSON,
an unknown action or category, a timestamp before -1, a creation with negative bytes) is one line naming the file,
the entry and the fix: the numbers derived from such a file would be silently wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import msgspec
import numpy as np

from ..errors import TraceFormatError
from ..formats import core

ACTIONS = {1: "preexisting", 2: "create", 3: "increment_version", 4: "destroy"}
CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown")
FIX = "give the file torch.profiler's export_memory_timeline writes for a path ending in .raw.json.gz"
MAX_BYTES = 2**31

_Big = Annotated[int, msgspec.Meta(ge=-(2**62), le=2**62)]
Entry = tuple[_Big, Annotated[int, msgspec.Meta(ge=1, le=4)], _Big, Annotated[int, msgspec.Meta(ge=0, le=7)]]


@dataclass(frozen=True, slots=True, eq=False)
class MemoryExport:
    """The entries in file order (torch writes them in time order, the pre-existing ones first)."""

    source: str
    ts_ns: np.ndarray  # -1: existed before profiling began
    action: np.ndarray
    nbytes: np.ndarray  # signed: a destroy (and the old version of an increment) is negative
    category: np.ndarray  # index into CATEGORIES

    def __len__(self) -> int:
        return len(self.ts_ns)


def read_memory_export(path: str | os.PathLike) -> MemoryExport:
    """The raw export at ``path`` (plain or gzip JSON), checked entry by entry."""
    name = os.fspath(path)
    data = core.read_bytes(name, error=TraceFormatError, max_bytes=MAX_BYTES)
    if not data.strip():
        raise TraceFormatError(f"{name}: empty file; {FIX}")
    if data.lstrip()[:1] == b"{":
        raise TraceFormatError(
            f"{name}: a JSON object (a Kineto trace? `tracekit analyze` reads those), not torch's "
            f"raw memory timeline (a list); {FIX}"
        )
    rows = core.decode(
        data,
        list[Entry],
        source=name,
        error=TraceFormatError,
        fix="each entry must be [timestamp_ns, action 1-4, bytes, category 0-7]; " + FIX,
    )
    if not rows:
        raise TraceFormatError(
            f"{name}: no memory events (an empty list); was profile_memory=True with "
            "record_shapes and with_stack set, and did the profiled code allocate?"
        )
    arr = np.array(rows, dtype=np.int64).reshape(-1, 4)
    ts, action, nbytes, category = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
    _check(name, ts, action, nbytes)
    return MemoryExport(name, ts, action.astype(np.int8), nbytes, category.astype(np.int8))


def _check(name: str, ts: np.ndarray, action: np.ndarray, nbytes: np.ndarray) -> None:
    problems = [
        (ts < -1, "a timestamp below -1 (-1 marks tensors that existed before profiling)"),
        ((ts == -1) & (action != 1), "timestamp -1 on an action other than preexisting (1)"),
        (((action == 1) | (action == 2)) & (nbytes < 0), "a negative size on a create or preexisting entry"),
        ((action == 4) & (nbytes > 0), "a positive size on a destroy entry (torch writes them negative)"),
        (np.r_[False, (ts[1:] < ts[:-1]) & (ts[1:] != -1)], "a timestamp earlier than the entry before it"),
    ]
    for mask, what in problems:
        bad = np.flatnonzero(mask)
        if len(bad):
            i = int(bad[0])
            raise TraceFormatError(f"{name}: entry {i} ([{ts[i]}, {action[i]}, {nbytes[i]}, ...]) has {what}; {FIX}")
