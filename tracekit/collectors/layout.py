"""The parallel layout: a device mesh of (dp, cp, tp) with tp innermost, its process groups and their dimensions.

Global rank = (dp_index * cp + cp_index) * tp + tp_index. Groups are created on every rank in the same order
(``dist.new_group`` is collective) and named ``group_desc="tracekit:<dimension>"``:

- ``tp``: the tensor-parallel group; its desc is ``tracekit:sp`` when sequence parallelism is on, because then
  every collective on it (all-gather / reduce-scatter conjugates, sequence-parallel LayerNorm gradients) is a
  sequence-parallel one. One group, one dimension: the analyzer needs no per-collective override.
- ``cp``: the context-parallel group, desc ``tracekit:cp`` (ring attention) or ``tracekit:ulysses``.
- ``dp``: the gradient-synchronisation group: every rank holding the same weight shard (dp x cp ranks, as
  Megatron's DATA_PARALLEL_GROUP_WITH_CP), desc ``tracekit:dp``. Created only when it has more than one rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ..errors import ConfigError
from . import comm


@dataclass(frozen=True, slots=True)
class Layout:
    tp: int = 1
    cp: int = 1
    dp: int = 1
    sequence_parallel: bool = False
    cp_kind: str = "ring"  # "ring" or "ulysses"

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(dp, cp, tp) indices of a global rank."""
        return rank // (self.tp * self.cp), (rank // self.tp) % self.cp, rank % self.tp

    def rank_of(self, dp: int, cp: int, tp: int) -> int:
        return (dp * self.cp + cp) * self.tp + tp

    def dimension(self, axis: str) -> str:
        if axis == "tp":
            return "sp" if self.sequence_parallel else "tp"
        if axis == "cp":
            return "ulysses" if self.cp_kind == "ulysses" else "cp"
        return axis

    def group_ranks(self, axis: str) -> list[list[int]]:
        """Every group of ``axis`` ("tp", "cp" or "dp"), each as its sorted global ranks."""
        r = range
        if axis == "tp":
            return [[self.rank_of(d, c, t) for t in r(self.tp)] for d in r(self.dp) for c in r(self.cp)]
        if axis == "cp":
            return [[self.rank_of(d, c, t) for c in r(self.cp)] for d in r(self.dp) for t in r(self.tp)]
        if axis == "dp":
            return [sorted(self.rank_of(d, c, t) for d in r(self.dp) for c in r(self.cp)) for t in r(self.tp)]
        raise ConfigError(f"unknown axis {axis!r}; use tp, cp or dp")

    def sizes(self) -> dict[str, int]:
        return {"tp": self.tp, "cp": self.cp, "dp": self.dp}

    def to_dict(self) -> dict:
        return {"tp": self.tp, "cp": self.cp, "dp": self.dp, "sequence_parallel": self.sequence_parallel,
                "cp_kind": self.cp_kind, "world_size": self.world_size}


@dataclass(slots=True)
class Groups:
    """This rank's process groups (None where the axis has one rank) and every group created, for the manifest."""

    layout: Layout
    tp: object = None
    cp: object = None
    dp: object = None
    created: list[dict] = field(default_factory=list)

    def get(self, axis: str):
        return getattr(self, axis)

    def mine(self) -> list[tuple[str, object]]:
        return [(axis, g) for axis in ("tp", "cp", "dp") if (g := getattr(self, axis)) is not None]


def build_groups(layout: Layout, warm_up: bool = True) -> Groups:
    """Create every group of ``layout`` (collective: all ranks call it) and return this rank's."""
    if dist.get_world_size() != layout.world_size:
        raise ConfigError(f"layout tp{layout.tp} x cp{layout.cp} x dp{layout.dp} needs {layout.world_size} "
                          f"processes, the world has {dist.get_world_size()}; change --tp/--cp/--dp")
    me, groups = dist.get_rank(), Groups(layout)
    sizes = {"tp": layout.tp, "cp": layout.cp, "dp": layout.dp * layout.cp}
    for axis in ("tp", "cp", "dp"):
        if sizes[axis] == 1:
            continue
        dim = layout.dimension(axis)
        for ranks in layout.group_ranks(axis):
            group = dist.new_group(ranks, group_desc=f"tracekit:{dim}")
            if me in ranks:
                setattr(groups, axis, group)
            groups.created.append({"name": comm.group_name(group) if me in ranks else "",
                                   "desc": f"tracekit:{dim}", "ranks": ranks, "size": len(ranks),
                                   "dimension": dim})
    _share_names(groups.created)
    if warm_up:
        warm_up_groups(groups)
    return groups


def _share_names(created: list[dict]) -> None:
    """Fill in the names of groups this rank is not in (members know them; the manifest needs them all)."""
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, [g["name"] for g in created])
    for i, g in enumerate(created):
        g["name"] = next((names[i] for names in everyone if names[i]), g["name"])


def warm_up_groups(groups: Groups) -> None:
    """One small all-reduce and all-to-all on each of this rank's groups, outside any profiled step: the
    first collective on a gloo group pays its connection set-up (~0.5 s)."""
    for _, g in groups.mine():
        t = torch.ones(dist.get_world_size(g))
        dist.all_reduce(t, group=g)
        dist.all_to_all_single(torch.empty_like(t), t, group=g)
    dist.barrier()
