"""A reference transformer layer that follows Korthikanti et al. 2022 exactly, as ONE rank of a TP group.

The per-rank layer of tensor parallelism has heads/t and 4h/t; the LayerNorm/dropout regions see the whole
sequence under TP or s/t under TP + SP (Megatron's column-parallel linear then saves its sequence shard and
all-gathers again in backward). The saved bytes of a rank do not depend on what its collectives carry, so a
``SimComm`` (one process standing for rank 0) gives the true per-rank number; ``GlooComm`` runs the same layer
on a real gloo group.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class SimComm:
    """Rank ``rank`` of a ``size``-way group simulated in one process (every peer holds the same shard)."""

    def __init__(self, size: int = 1, rank: int = 0):
        self.size, self.rank = size, rank

    def all_gather(self, x):
        return torch.cat([x] * self.size, dim=0)

    def reduce_scatter(self, x):
        return x.chunk(self.size, dim=0)[self.rank].clone()

    def all_reduce(self, x):
        return x.clone()


class GlooComm(SimComm):
    """The same three collectives on the default (gloo) process group."""

    def __init__(self):
        import torch.distributed as dist

        self.dist = dist
        super().__init__(dist.get_world_size(), dist.get_rank())

    def all_gather(self, x):
        parts = [torch.empty_like(x) for _ in range(self.size)]
        self.dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=0)

    def reduce_scatter(self, x):
        return self.all_reduce(x).chunk(self.size, dim=0)[self.rank].clone()

    def all_reduce(self, x):
        out = x.clone()
        self.dist.all_reduce(out)
        return out


class _CopyToTP(torch.autograd.Function):  # Megatron's f: identity forward, all-reduce backward
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm.all_reduce(g), None


class _ReduceFromTP(torch.autograd.Function):  # g: all-reduce forward, identity backward
    @staticmethod
    def forward(ctx, x, comm):
        return comm.all_reduce(x)

    @staticmethod
    def backward(ctx, g):
        return g, None


class _ReduceScatterSeq(torch.autograd.Function):  # SP's g-bar: reduce-scatter forward, all-gather backward
    @staticmethod
    def forward(ctx, x, comm):
        ctx.comm = comm
        return comm.reduce_scatter(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.comm.all_gather(g), None


class _GatherSeqLinear(torch.autograd.Function):
    """SP column-parallel linear: saves the sequence SHARD, all-gathers it in forward and again in backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, comm):
        ctx.save_for_backward(x, weight)
        ctx.comm = comm
        return F.linear(comm.all_gather(x), weight, bias)

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        full = ctx.comm.all_gather(x)
        grad_x = ctx.comm.reduce_scatter(g @ weight)
        grad_w = g.flatten(0, -2).t() @ full.flatten(0, -2)
        return grad_x, grad_w, g.flatten(0, -2).sum(0), None


def dropout(x, p):
    return torch.native_dropout(x, p, True)[0]  # a 1-byte (bool) mask


class RefLayer(nn.Module):
    """One rank's shard of the paper's layer. Input [s_local, b, h]: s under TP, s/t under TP + SP."""

    def __init__(self, hidden, heads, tp=1, sp=False, comm=None, p=0.1, dtype=torch.bfloat16):
        super().__init__()
        self.h, self.heads_local, self.tp, self.sp, self.p = hidden, heads // tp, tp, sp, p
        self.comm = comm or SimComm(tp)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.fc1 = nn.Linear(hidden, 3 * hidden // tp), nn.Linear(hidden, 4 * hidden // tp)
        self.proj, self.fc2 = nn.Linear(hidden // tp, hidden), nn.Linear(4 * hidden // tp, hidden)
        self.to(dtype)

    def _column(self, lin, y):
        if self.sp:
            return _GatherSeqLinear.apply(y, lin.weight, lin.bias, self.comm)
        return F.linear(_CopyToTP.apply(y, self.comm) if self.tp > 1 else y, lin.weight, lin.bias)

    def _row(self, lin, y):
        out = F.linear(y, lin.weight)
        if self.sp:
            out = _ReduceScatterSeq.apply(out, self.comm)
        elif self.tp > 1:
            out = _ReduceFromTP.apply(out, self.comm)
        return out + lin.bias

    def attention(self, qkv):
        s, b, _ = qkv.shape
        d = self.h // (self.heads_local * self.tp)
        q, k, v = qkv.view(s, b, self.heads_local, 3 * d).split(d, dim=-1)
        q, k, v = (u.permute(1, 2, 0, 3) for u in (q, k, v))  # [b, a/t, s, d]
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        probs = dropout(torch.softmax(scores, dim=-1), self.p)
        ctx = torch.matmul(probs, v)  # [b, a/t, s, d]
        return ctx.permute(2, 0, 1, 3).reshape(s, b, self.heads_local * d)

    def forward(self, x):
        a = self._row(self.proj, self.attention(self._column(self.qkv, self.ln1(x))))
        x = x + dropout(a, self.p)
        z = self._row(self.fc2, F.gelu(self._column(self.fc1, self.ln2(x))))
        return x + dropout(z, self.p)


def layer_input(seq, batch, hidden, tp=1, sp=False, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    s_local = seq // tp if sp else seq
    return torch.randn(s_local, batch, hidden, generator=g).to(dtype).requires_grad_()
