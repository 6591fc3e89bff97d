"""The pipeline's mesh: stages of tp x cp x dp ranks and the two-rank links between neighbouring stages.

Ranks: global = stage x S + r, with S = tp x cp x dp the mesh of one stage (built as collectors/layout.py builds
it, offset by the stage). Neighbouring stages talk over two-rank *link* groups, one per direction and per
inner rank (activations s -> s+1, gradients s+1 -> s), all named ``tracekit:pp``: a group per direction keeps
each group's instances in microbatch order on both of its ranks, whatever the schedule interleaves.

Point to point on gloo: ``gloo:send``/``gloo:recv`` leave no worker span (DESIGN.md), so a send is an
``all_to_all_single`` on the link group with every row going to the peer and none coming back, annotated as op
``send`` (the receiver's as ``recv``) with src/dst: the trace shows the transfer on the worker thread and the
analyzer matches the pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import torch.distributed as dist

from ...errors import ConfigError
from ...model.layout import ParallelLayout
from .. import comm
from ..layout import AXES, Groups, _share_names, group_ranks, warm_up_groups


@dataclass(slots=True)
class Stage:
    """This rank's place in the pipeline: its stage, its stage's groups, and the links to its neighbours."""

    index: int
    size: int
    local: int  # rank within the stage's mesh
    groups: Groups
    act_in: object = None  # link with stage - 1: activations arrive
    act_out: object = None  # link with stage + 1: activations leave
    grad_in: object = None  # link with stage + 1: gradients arrive
    grad_out: object = None  # link with stage - 1: gradients leave
    links: list = field(default_factory=list)

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def last(self) -> bool:
        return self.index == self.size - 1


def inner_layout(layout: ParallelLayout) -> ParallelLayout:
    return replace(layout, pp=1, recorded=None)


def build_stage(layout: ParallelLayout) -> Stage:
    """Create every group of the pipeline (collective: all ranks call it in the same order); return this rank's."""
    if dist.get_world_size() != layout.world_size:
        raise ConfigError(
            f"layout tp{layout.tp} x cp{layout.cp} x dp{layout.dp} x pp{layout.pp} needs "
            f"{layout.world_size} processes, the world has {dist.get_world_size()}; change the degrees"
        )
    inner = inner_layout(layout)
    width, me = inner.world_size, dist.get_rank()
    stage = Stage(me // width, layout.pp, me % width, Groups(layout))
    created = stage.groups.created
    sizes = {"tp": inner.tp, "cp": inner.cp, "dp": inner.dp * inner.cp}
    for axis in AXES:
        if sizes[axis] == 1:
            continue
        dim = inner.dimension(axis).value
        for s in range(layout.pp):
            for local in group_ranks(inner, axis):
                _new_group([s * width + r for r in local], dim, created, lambda g, a=axis: setattr(stage.groups, a, g))
    for s in range(layout.pp - 1):
        for r in range(width):
            lo, hi = s * width + r, (s + 1) * width + r
            for kind in ("act", "grad"):
                sides = ("act_out", "act_in") if kind == "act" else ("grad_in", "grad_out")
                _new_group([lo, hi], "pp", created, lambda g, side=sides[0] if me == lo else sides[1]: setattr(stage, side, g))
    _share_names(created)
    warm_up_groups(stage.groups)
    stage.links = [g for g in (stage.act_in, stage.grad_out, stage.act_out, stage.grad_in) if g is not None]
    for g in stage.links:  # links to stage - 1 first: the chain starts at stage 0, nobody waits in a circle
        t = torch.ones(2)
        dist.all_to_all_single(torch.empty_like(t), t, group=g)
    dist.barrier()
    return stage


def _new_group(ranks: list[int], dim: str, created: list[dict], mine) -> None:
    group = dist.new_group(ranks, group_desc=f"tracekit:{dim}")
    member = dist.get_rank() in ranks
    if member:
        mine(group)
    created.append(
        {
            "name": comm.group_name(group) if member else "",
            "desc": f"tracekit:{dim}",
            "ranks": ranks,
            "size": len(ranks),
            "dimension": dim,
        }
    )


def p2p(t: torch.Tensor, group, send: bool) -> comm.Work:
    """Send ``t`` to the other rank of a two-rank link, or receive into ``t`` from it (an annotated
    ``all_to_all_single`` with zero splits, so gloo runs it on its worker thread). Posted asynchronously."""
    ranks = dist.get_process_group_ranks(group)
    me = dist.get_rank()
    peer = ranks[1] if ranks[0] == me else ranks[0]
    full = [0, 0]
    full[ranks.index(peer)] = t.shape[0]
    empty = t.new_empty((0, *t.shape[1:]))
    if send:
        inp, out, in_split, out_split, src, dst = t.contiguous(), empty, full, [0, 0], me, peer
    else:
        inp, out, in_split, out_split, src, dst = empty, t, [0, 0], full, peer, me
    with comm.annotate(
        "send" if send else "recv",
        inp if send else None,
        None if send else out,
        group,
        src=src,
        dst=dst,
        in_split=in_split,
        out_split=out_split,
    ) as ann:
        work = dist.all_to_all_single(out, inp, out_split, in_split, group=group, async_op=True)
    return comm.Work(work, ann)
