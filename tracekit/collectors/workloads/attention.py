"""Causal self-attention: plain, ring (context parallel, zig-zag split, online softmax) and Ulysses.

q, k, v are [batch, heads, seq, head_dim]; ``*_pos`` are the global sequence positions of their rows, so the
causal mask is ``q_pos >= k_pos`` whatever the split.

Without context parallelism (and inside Ulysses) attention is Megatron's core attention in the activation
dtype: QK^T, a fused scale + causal-mask + softmax that saves only its output (Megatron's
``ScaledUpperTriangMaskedSoftmax``; softmax arithmetic in fp32), ``torch.native_dropout`` on the probabilities
(a one-byte mask), then x V, so what it keeps for backward is the paper's (Korthikanti et al. 2022): Q, K, V,
the softmax output, its dropout mask and the dropout output. Ring attention merges blocks with an online
softmax in fp32 and drops out the unnormalised probabilities, as flash attention does.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from . import functional as F_


def zigzag_positions(seq: int, cp: int, index: int, device=None) -> torch.Tensor:
    """Global positions held by context-parallel rank ``index``: chunks ``index`` and ``2cp-1-index`` of the
    sequence cut in ``2cp`` chunks (Megatron CP's causal load balancing)."""
    n = seq // (2 * cp)
    first = torch.arange(index * n, (index + 1) * n, device=device)
    second = torch.arange((2 * cp - 1 - index) * n, (2 * cp - index) * n, device=device)
    return torch.cat([first, second])


def block_attention(q, k, v, q_pos, k_pos, dropout_p: float):
    """Attention of ``q`` over one block of keys: (output normalised within the block, log-sum-exp per query);
    rows that see no key get output 0 and lse -inf. Computed in fp32."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    mask = q_pos[:, None] >= k_pos[None, :]
    scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.detach().amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = torch.exp(scores - m)
    denom = p.sum(dim=-1, keepdim=True)
    seen = denom > 0
    safe = torch.where(seen, denom, torch.ones_like(denom))
    p = torch.native_dropout(p, dropout_p, True)[0]
    out = (p @ v.float()) / safe
    lse = torch.where(seen, m + torch.log(safe), torch.full_like(m, float("-inf")))
    return out, lse


def merge(out_a, lse_a, out_b, lse_b):
    """Online-softmax merge of two partial attentions (``lse_a`` finite on every row)."""
    lse = torch.logaddexp(lse_a, lse_b)
    return out_a * torch.exp(lse_a - lse) + out_b * torch.exp(lse_b - lse), lse


class CausalSoftmax(torch.autograd.Function):
    """softmax(scale * scores) under the causal mask, computed in fp32, returned in the scores' dtype; saves
    only its output (the backward of softmax needs nothing else)."""

    @staticmethod
    def forward(ctx, scores, q_pos, k_pos, scale: float):
        masked = (scores.float() * scale).masked_fill(q_pos[:, None] < k_pos[None, :], float("-inf"))
        probs = torch.softmax(masked, dim=-1).to(scores.dtype)
        ctx.scale = scale
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, g):
        (probs,) = ctx.saved_tensors
        p, gf = probs.float(), g.float()
        grad = p * (gf - (gf * p).sum(dim=-1, keepdim=True)) * ctx.scale
        return grad.to(g.dtype), None, None, None


def attention(q, k, v, q_pos, k_pos, dropout_p: float):
    """Core attention (every query sees at least its own position): see the module docstring."""
    scores = torch.matmul(q, k.transpose(-1, -2))
    probs = CausalSoftmax.apply(scores, q_pos, k_pos, 1.0 / math.sqrt(q.shape[-1]))
    if dropout_p > 0:
        probs = torch.native_dropout(probs, dropout_p, True)[0]
    return torch.matmul(probs, v)


def ring_attention(q, k, v, q_pos, group, seq: int, dropout_p: float, overlap: bool):
    """Ring attention over the context-parallel ``group``: K/V blocks travel around the ring, each rank
    merges the block it holds into its running output. ``overlap``: the next block's exchange runs while the
    current block computes."""
    cp, me = dist.get_world_size(group), dist.get_rank(group)
    kv = torch.stack([k, v])
    out = lse = None
    for step in range(cp):
        work = None
        if step + 1 < cp:
            nxt, work = F_.ring_shift(kv, group, wait=not overlap)
        k_pos = zigzag_positions(seq, cp, (me - step) % cp, q_pos.device)
        o, blk_lse = block_attention(q, kv[0], kv[1], q_pos, k_pos, dropout_p)
        out, lse = (o, blk_lse) if out is None else merge(out, lse, o, blk_lse)
        if work is not None:
            work.wait()
            kv = nxt
    assert out is not None  # cp >= 1: the loop ran at least once
    return out.to(q.dtype)


def ulysses_attention(qkv, group, dropout_p: float, chunks: int):
    """Ulysses: all-to-all sequence->heads before attention and heads->sequence after.

    ``qkv`` is [s_local, b, heads, 3, d] (contiguous sequence shard); returns [s_local, b, heads, d].
    ``chunks > 1``: heads are cut into chunks, each chunk's all-to-all runs under the previous chunk's
    attention."""
    n = dist.get_world_size(group)
    s_l, b, heads = qkv.shape[:3]
    parts = list(qkv.chunk(chunks, dim=2))

    def send(part):  # [s_l, b, hc, 3, d] -> [n, s_l, b, hc/n, 3, d]
        hc = part.shape[2]
        x = part.reshape(s_l, b, n, hc // n, *part.shape[3:]).movedim(2, 0)
        return F_.all_to_all(x, group, wait=False)

    pending = [send(parts[0])]
    outs = []
    pos = torch.arange(n * s_l, device=qkv.device)
    for c in range(len(parts)):
        if c + 1 < len(parts):
            pending.append(send(parts[c + 1]))
        full, work = pending[c]
        work.wait()
        full = full.reshape(n * s_l, b, *full.shape[3:])  # [s, b, hc/n, 3, d]
        q, k, v = (full[:, :, :, i].permute(1, 2, 0, 3) for i in range(3))
        o = attention(q, k, v, pos, pos, dropout_p).permute(2, 0, 1, 3)  # [s, b, hc/n, d]
        outs.append(F_.all_to_all(o.reshape(n, s_l, *o.shape[1:]), group, wait=False))
    result = []
    for back, work in outs:
        work.wait()
        result.append(back.movedim(0, 2).reshape(s_l, b, -1, back.shape[-1]))  # [s_l, b, hc, d]
    return torch.cat(result, dim=2)
