"""Which NVTX ranges are the steps of an export: PyTorch's ``ProfilerStep#N`` where the run recorded it, else the
first family of iteration ranges below that the export holds (a table: data, each family with who writes it).

A family's ranges are numbered by the number in their name. ``--window NAME`` (the analysis' option) takes any
range name instead; without any step range the analysis uses one window over the capture, as for Kineto.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model.events import EventKind as K


@dataclass(frozen=True, slots=True)
class IterationFamily:
    label: str  # how the warning names the family
    pattern: re.Pattern
    who: str


ITERATION_FAMILIES: tuple[IterationFamily, ...] = (
    # torch.cuda.nvtx.range_push(f"iteration{i}") as PyTorch's Nsight guide writes it, Megatron-style
    # "iteration 12", NeMo/Lightning scripts' "iteration_12", "Iteration 12"
    IterationFamily(
        "iteration N", re.compile(r"(?i)^(?:train[ _-]?)?(?:iteration|iter)[ _#:=-]*(\d{1,9})$"), "PyTorch, Megatron, NeMo"
    ),
    # Hugging Face / Lightning callbacks: "step_12", "train_step 12", "global_step=12"
    IterationFamily(
        "step N", re.compile(r"(?i)^(?:train[ _-]?|global[ _-]?|training[ _-]?)?step[ _#:=-]*(\d{1,9})$"), "HF, Lightning"
    ),
)


def iteration_windows(
    kind: np.ndarray, is_device: np.ndarray, name: np.ndarray, names: list[str]
) -> tuple[np.ndarray, np.ndarray, str]:
    """(rows, numbers, label) of the first family with ranges among the host annotations; empty when none."""
    host_annot = np.flatnonzero((kind == K.ANNOTATION) & ~is_device & (name >= 0))
    if not len(host_annot):
        return np.empty(0, np.int64), np.empty(0, np.int32), ""
    used = np.unique(name[host_annot])
    for family in ITERATION_FAMILIES:
        numbers = {int(c): int(m.group(1)) for c in used.tolist() if (m := family.pattern.match(names[c]))}
        if numbers:
            lut = np.full(len(names) + 1, -1, np.int64)
            for c, v in numbers.items():
                lut[c] = v
            num = lut[name[host_annot]]
            rows = host_annot[num >= 0]
            return rows, num[num >= 0].astype(np.int32), family.label
    return np.empty(0, np.int64), np.empty(0, np.int32), ""
