"""A pre-LayerNorm transformer layer built from Megatron-style column- and row-parallel linears.

    x -> LN -> QKV (column) -> causal attention -> proj (row) -> dropout -> +x
      -> LN -> FC1 (column) -> GELU -> FC2 (row) -> dropout -> +

Weights are generated full-size from a seed (so a single-process reference can use the very same ones) and
each rank keeps its shard: QKV rows and FC1 rows of its heads / columns, proj and FC2 columns. The QKV weight is
laid out [heads, 3, head_dim] along its output dimension so a head-contiguous slice is a tensor-parallel shard.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ...model.layout import CpKind, ParallelLayout
from . import attention as attn
from .functional import ColumnParallel, RowParallel


@dataclass(frozen=True, slots=True)
class Parallel:
    """How one rank runs the layer: the layout, its groups (None = no communication) and its coordinates."""

    layout: ParallelLayout = field(default_factory=ParallelLayout)
    tp_group: object = None
    cp_group: object = None
    tp_index: int = 0
    cp_index: int = 0
    chunks: int = 1  # > 1: overlap variant

    @property
    def overlap(self) -> bool:
        return self.chunks > 1

    @property
    def tp(self) -> int:
        return self.layout.tp

    @property
    def cp(self) -> int:
        return self.layout.cp

    @property
    def sequence_parallel(self) -> bool:
        return self.layout.sequence_parallel

    @property
    def ulysses(self) -> bool:
        return self.layout.cp_kind is CpKind.ULYSSES


def full_weights(hidden: int, layer: int, seed: int) -> dict[str, torch.Tensor]:
    """The unsharded fp32 weights of layer ``layer``, identical on every rank."""
    g = torch.Generator().manual_seed(seed * 1000 + layer)
    h = hidden
    rnd = lambda *shape: torch.randn(*shape, generator=g) * (1.0 / h**0.5)
    return {
        "ln1_w": 1 + 0.1 * torch.randn(h, generator=g),
        "ln1_b": 0.1 * torch.randn(h, generator=g),
        "qkv": rnd(3 * h, h),
        "proj": rnd(h, h),
        "ln2_w": 1 + 0.1 * torch.randn(h, generator=g),
        "ln2_b": 0.1 * torch.randn(h, generator=g),
        "fc1": rnd(4 * h, h),
        "fc2": rnd(h, 4 * h),
    }


def shard_weights(full: dict[str, torch.Tensor], tp: int, index: int) -> dict[str, torch.Tensor]:
    """This tensor-parallel rank's slice of ``full``."""
    rows = lambda w: w.chunk(tp, dim=0)[index]
    cols = lambda w: w.chunk(tp, dim=1)[index]
    return {
        "ln1_w": full["ln1_w"],
        "ln1_b": full["ln1_b"],
        "qkv": rows(full["qkv"]),
        "proj": cols(full["proj"]),
        "ln2_w": full["ln2_w"],
        "ln2_b": full["ln2_b"],
        "fc1": rows(full["fc1"]),
        "fc2": cols(full["fc2"]),
    }


class Layer(nn.Module):
    """One transformer layer; ``forward`` takes this rank's [s_local, b_local, h] and returns the same shape."""

    LN_PARAMS = ("ln1_w", "ln1_b", "ln2_w", "ln2_b")
    ln1_w: nn.Parameter
    ln1_b: nn.Parameter
    ln2_w: nn.Parameter
    ln2_b: nn.Parameter

    def __init__(
        self,
        weights: dict[str, torch.Tensor],
        heads: int,
        par: Parallel,
        seq: int,
        dropout: float = 0.0,
        dtype=torch.float32,
        device=None,
    ):
        super().__init__()
        for name, w in weights.items():
            self.register_parameter(name, nn.Parameter(w.to(device=device, dtype=dtype).clone()))
        self.heads_local, self.par, self.seq, self.dropout = heads // par.tp, par, seq, dropout

    def _mode(self) -> str:
        return "sp" if self.par.sequence_parallel else "tp"

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        p, mode = self.par, self._mode()
        chunks = p.chunks if p.tp_group is not None else 1
        h = x.shape[-1]
        ln1 = F.layer_norm(x, (h,), self.ln1_w, self.ln1_b)
        qkv = ColumnParallel.apply(ln1, self.qkv, mode, p.tp_group, chunks)
        ctx = self._attention(qkv, positions)
        o = RowParallel.apply(ctx, self.proj, mode, p.tp_group, chunks)
        x = x + self._dropout(o)
        ln2 = F.layer_norm(x, (h,), self.ln2_w, self.ln2_b)
        return x + self._dropout(self._mlp(ln2))

    def _mlp(self, ln2: torch.Tensor) -> torch.Tensor:
        """The MLP block on the LayerNorm output (the mixture-of-experts layer of moe.py replaces it)."""
        p, mode = self.par, self._mode()
        chunks = p.chunks if p.tp_group is not None else 1
        f = F.gelu(ColumnParallel.apply(ln2, self.fc1, mode, p.tp_group, chunks))
        return RowParallel.apply(f, self.fc2, mode, p.tp_group, chunks)

    def _dropout(self, y: torch.Tensor) -> torch.Tensor:
        """``torch.native_dropout``: a one-byte mask, as the paper counts (``F.dropout`` on CPU keeps it in the
        activation dtype); none at all at p = 0."""
        if self.dropout > 0 and self.training:
            return torch.native_dropout(y, self.dropout, True)[0]
        return y

    def _attention(self, qkv: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        s, b = qkv.shape[:2]
        qkv = qkv.view(s, b, self.heads_local, 3, -1)
        p, drop = self.par, self.dropout if self.training else 0.0
        if p.cp_group is not None and p.ulysses:
            heads_per = self.heads_local // p.cp
            chunks = max(c for c in range(1, p.chunks + 1) if heads_per % c == 0)
            out = attn.ulysses_attention(qkv, p.cp_group, drop, chunks)
            return out.reshape(s, b, -1)
        q, k, v = (qkv[:, :, :, i].permute(1, 2, 0, 3) for i in range(3))  # [b, heads, s, d]
        if p.cp_group is not None:
            out = attn.ring_attention(q, k, v, positions, p.cp_group, self.seq, drop, p.overlap)
        else:
            out = attn.attention(q, k, v, positions, positions, drop)
        return out.permute(2, 0, 1, 3).reshape(s, b, -1)


def local_positions(seq: int, par: Parallel, device=None) -> torch.Tensor:
    """Global positions of the sequence this rank's attention sees (after any sequence-parallel gather)."""
    if par.cp == 1 or par.ulysses:
        n = seq // par.cp
        return torch.arange(par.cp_index * n, (par.cp_index + 1) * n, device=device)
    return attn.zigzag_positions(seq, par.cp, par.cp_index, device)


def shard_input(x: torch.Tensor, par: Parallel, dp: int, dp_index: int) -> torch.Tensor:
    """This rank's [s_local, b_local, h] slice of the full input [s, b, h]."""
    x = x.chunk(dp, dim=1)[dp_index]
    if par.cp > 1:
        x = x[local_positions(x.shape[0], par).cpu()] if not par.ulysses else x.chunk(par.cp, dim=0)[par.cp_index]
    if par.sequence_parallel and par.tp > 1:
        x = x.chunk(par.tp, dim=0)[par.tp_index]
    return x


def full_input(seq: int, batch: int, hidden: int, seed: int) -> torch.Tensor:
    return torch.randn(seq, batch, hidden, generator=torch.Generator().manual_seed(seed + 7))
