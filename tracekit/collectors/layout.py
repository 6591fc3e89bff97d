"""The collectors' device mesh: (dp, cp, tp) with tp innermost, its process groups and their dimensions. The
layout itself (sizes, flags, validation, what each axis serves) is :class:`tracekit.model.layout.ParallelLayout`.

Global rank = (dp_index * cp + cp_index) * tp + tp_index. Groups are created on every rank in the same order
(``dist.new_group`` is collective) and named ``group_desc="tracekit:<dimension>"``:

- ``tp``: the tensor-parallel group; its desc is ``tracekit:sp`` when sequence parallelism is on, because then
  every collective on it (all-gather / reduce-scatter conjugates, sequence-parallel LayerNorm gradients) is a
  sequence-parallel one. One group, one dimension: the analyzer needs no per-collective override.
- ``cp``: the context-parallel group, desc ``tracekit:cp`` (ring attention) or ``tracekit:ulysses``.
- ``dp``: the gradient-synchronisation group: every rank holding the same weight shard (dp x cp ranks, as
  Megatron's DATA_PARALLEL_GROUP_WITH_CP), desc ``tracekit:dp``. Created only when it has more than one rank.
- ``ep`` (only when ep > 1): the expert-parallel group, ``ep`` consecutive ranks of a dp group (Megatron's
  EXPERT_MODEL_PARALLEL_GROUP), desc ``tracekit:ep``; ``edp``: the ranks of a dp group holding the same experts
  (EXPERT_DATA_PARALLEL_GROUP, dp x cp / ep ranks), whose gradient all-reduce is data parallelism: desc
  ``tracekit:dp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ..errors import ConfigError
from ..model.layout import ParallelLayout
from . import comm

AXES = ("tp", "cp", "dp")  # the axes the collectors build groups for, innermost first
EXPERT_AXES = ("ep", "edp")  # built only when ep > 1


def coords(layout: ParallelLayout, rank: int) -> tuple[int, int, int]:
    """(dp, cp, tp) indices of a global rank."""
    return rank // (layout.tp * layout.cp), (rank // layout.tp) % layout.cp, rank % layout.tp


def rank_of(layout: ParallelLayout, dp: int, cp: int, tp: int) -> int:
    return (dp * layout.cp + cp) * layout.tp + tp


def group_ranks(layout: ParallelLayout, axis: str) -> list[list[int]]:
    """Every group of ``axis`` ("tp", "cp" or "dp"), each as its sorted global ranks."""
    r, at, lay = range, rank_of, layout
    if axis == "tp":
        return [[at(lay, d, c, t) for t in r(lay.tp)] for d in r(lay.dp) for c in r(lay.cp)]
    if axis == "cp":
        return [[at(lay, d, c, t) for c in r(lay.cp)] for d in r(lay.dp) for t in r(lay.tp)]
    if axis == "dp":
        return [sorted(at(lay, d, c, t) for d in r(lay.dp) for c in r(lay.cp)) for t in r(lay.tp)]
    if axis in ("ep", "edp"):  # j = d * cp + c indexes a dp group; ep groups are runs of ep consecutive j
        n, ep = lay.dp * lay.cp, lay.ep
        member = (lambda k: range(k * ep, (k + 1) * ep)) if axis == "ep" else (lambda k: range(k, n, ep))
        count = n // ep if axis == "ep" else ep
        return [[at(lay, j // lay.cp, j % lay.cp, t) for j in member(k)] for t in r(lay.tp) for k in r(count)]
    raise ConfigError(f"unknown axis {axis!r}; use tp, cp, dp, ep or edp")


@dataclass(slots=True)
class Groups:
    """This rank's process groups (None where the axis has one rank) and every group created, for the manifest."""

    layout: ParallelLayout
    tp: object = None
    cp: object = None
    dp: object = None
    ep: object = None
    edp: object = None
    created: list[dict] = field(default_factory=list)

    def get(self, axis: str) -> object:
        return getattr(self, axis)

    def mine(self) -> list[tuple[str, Any]]:
        return [(axis, g) for axis in (*AXES, *EXPERT_AXES) if (g := getattr(self, axis)) is not None]


def build_groups(layout: ParallelLayout, warm_up: bool = True) -> Groups:
    """Create every group of ``layout`` (collective: all ranks call it) and return this rank's."""
    if layout.pp > 1:
        raise ConfigError(
            f"layout pp{layout.pp}: the collectors build tp, cp, dp and ep groups only; "
            "create pipeline groups yourself and pass them to profile(groups=...)"
        )
    if dist.get_world_size() != layout.world_size:
        raise ConfigError(
            f"layout tp{layout.tp} x cp{layout.cp} x dp{layout.dp} needs {layout.world_size} "
            f"processes, the world has {dist.get_world_size()}; change --tp/--cp/--dp"
        )
    me, groups = dist.get_rank(), Groups(layout)
    sizes = {
        "tp": layout.tp,
        "cp": layout.cp,
        "dp": layout.dp * layout.cp,
        "ep": layout.ep,
        "edp": layout.dp * layout.cp // layout.ep if layout.ep > 1 else 1,
    }
    for axis in (*AXES, *EXPERT_AXES):
        if sizes[axis] == 1:
            continue
        dim = "dp" if axis == "edp" else layout.dimension(axis).value
        for ranks in group_ranks(layout, axis):
            group = dist.new_group(ranks, group_desc=f"tracekit:{dim}")
            if me in ranks:
                setattr(groups, axis, group)
            groups.created.append(
                {
                    "name": comm.group_name(group) if me in ranks else "",
                    "desc": f"tracekit:{dim}",
                    "ranks": ranks,
                    "size": len(ranks),
                    "dimension": dim,
                }
            )
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
