"""A tp × pp × dp layout for the generated runs (gen_ranks.py): ranks, process groups as Megatron-Core or torch
DeviceMesh create them, and which group each of the template's collectives runs in on every rank."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

# Megatron-Core parallel_state descriptions; DeviceMesh's are mesh_<dim name>
_MEGATRON = {
    "dp": "DATA_PARALLEL_GROUP",
    "mp": "MODEL_PARALLEL_GROUP",
    "tp": "TENSOR_MODEL_PARALLEL_GROUP",
    "pp": "PIPELINE_MODEL_PARALLEL_GROUP",
    "emb": "EMBEDDING_GROUP",
}
_PP_EXCHANGES = {  # (first sending stage, stage step between pairs, direction): sender stage s -> s + direction
    "ppA": (0, 2, +1),  # forward, even stages to the next
    "ppB": (1, 2, +1),  # forward, odd stages to the next
    "ppC": (1, 2, -1),  # backward, odd stages to the previous
    "ppD": (2, 2, -1),  # backward, even stages (from 2) to the previous
}


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    desc: str
    ranks: tuple[int, ...]

    @property
    def ranks_text(self) -> str:
        return "[" + ", ".join(map(str, self.ranks)) + "]"

    @property
    def stride(self) -> int:
        d = np.diff(self.ranks)
        return int(d[0]) if len(d) and (d == d[0]).all() else (1 if len(self.ranks) == 1 else -1)


@dataclass(frozen=True, slots=True)
class Groups:
    world: Group
    all: tuple[Group, ...]
    by_dim: dict  # dim -> tuple of groups; a rank's group of a dim: by_rank[dim][rank]
    by_rank: dict

    def of(self, rank: int, dim: str) -> Group:
        return self.by_dim[dim][self.by_rank[dim][rank]]

    def member_of(self, rank: int) -> list[Group]:
        return [g for g in self.all if rank in g.ranks]


@dataclass(frozen=True, slots=True)
class Layout:
    tp: int
    pp: int
    dp: int

    @staticmethod
    def parse(text: str) -> Layout:
        tp, pp, dp = (int(x) for x in text.lower().split("x"))
        return Layout(tp, pp, dp)

    @property
    def text(self) -> str:
        return f"{self.tp}x{self.pp}x{self.dp}"

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def coords(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tp index, dp index, pp index) of every rank: Megatron's default order tp-dp-pp, tp fastest."""
        r = np.arange(self.world)
        return r % self.tp, (r // self.tp) % self.dp, r // (self.tp * self.dp)

    def groups(self, naming: str = "megatron") -> Groups:
        return _groups(self, naming)

    def plan(self, roles: list[str], collectives: int) -> dict:
        """Per template collective k and rank: its role ("tp", "dp", "send", "recv"), the peer of a send/recv
        (-1 otherwise) and a group number (equal on the ranks that end it together)."""
        t, d, p = self.coords()
        n = self.world
        tp_group, dp_group = d + self.dp * p, t + self.tp * p
        out: dict[str, list] = {"role": [], "peer": [], "group": []}
        for k in range(collectives):
            role = roles[k % len(roles)]
            role = "tp" if (role.startswith("pp") and self.pp == 1) or (role == "dp" and self.dp == 1) else role
            role = "dp" if role == "tp" and self.tp == 1 and self.dp > 1 else role
            names = np.full(n, role if role in ("tp", "dp") else "tp", object)
            peer = np.full(n, -1, np.int64)
            group = np.where(names == "dp", n + dp_group, tp_group).astype(np.int64)
            if role in _PP_EXCHANGES:
                first, step, direction = _PP_EXCHANGES[role]
                stage_step = self.tp * self.dp
                sender = (p >= first) & ((p - first) % step == 0) & (p + direction >= 0) & (p + direction < self.pp)
                senders = np.flatnonzero(sender)
                receivers = senders + direction * stage_step
                names[senders], names[receivers] = "send", "recv"
                peer[senders], peer[receivers] = receivers, senders
                group[senders] = group[receivers] = 2 * n + np.minimum(senders, receivers)
            out["role"].append(names)
            out["peer"].append(peer)
            out["group"].append(group)
        return out


@functools.lru_cache(maxsize=4)
def _groups(layout: Layout, naming: str) -> Groups:
    """Every group in creation order (every rank creates every group, so its name, a number from one counter, is
    the same on all members): world, then dp, mp, tp, pp and embedding groups (Megatron-Core's order); for a
    DeviceMesh (pp, dp, tp) its three dimensions' groups."""
    t, d, p = layout.coords()
    ranks = np.arange(layout.world)
    made: list[Group] = [Group("0", "default_pg", tuple(range(layout.world)))]
    by_dim: dict = {}
    by_rank: dict = {}

    def make(dim: str, key: np.ndarray, member: np.ndarray | None = None) -> None:
        desc = _MEGATRON[dim] if naming == "megatron" else f"mesh_{dim}"
        member = np.ones(layout.world, bool) if member is None else member
        keys = np.unique(key[member])
        by_dim[dim] = tuple(
            Group(str(len(made) + i), desc, tuple(int(r) for r in ranks[member & (key == kk)])) for i, kk in enumerate(keys)
        )
        made.extend(by_dim[dim])
        by_rank[dim] = np.where(member, np.searchsorted(keys, key), -1)

    if naming == "megatron":
        make("dp", t + layout.tp * p)
        make("mp", d)
        make("tp", d + layout.dp * p)
        make("pp", t + layout.tp * d)
        if layout.pp > 1:  # the first and the last stage of each pipeline
            make("emb", t + layout.tp * d, (p == 0) | (p == layout.pp - 1))
    else:
        make("pp", t + layout.tp * d)
        make("dp", t + layout.tp * p)
        make("tp", d + layout.dp * p)
    return Groups(made[0], tuple(made), by_dim, by_rank)
