"""A single-process reference of the workload layer, written only with torch built-ins (SDPA for attention)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tracekit.collectors.workloads.layer import full_input, full_weights, shard_weights


def reference(cfg) -> tuple[float, dict[str, torch.Tensor]]:
    """(loss, {"<layer>.<param>": full gradient}) of ``cfg``'s layers on the full input, no dropout, fp32."""
    s, b, h, heads = cfg.seq, cfg.batch, cfg.hidden, cfg.heads
    x = full_input(s, b, h, cfg.seed)
    weights = [{k: v.clone().requires_grad_() for k, v in full_weights(h, i, cfg.seed).items()} for i in range(cfg.layers)]
    for w in weights:
        ln1 = F.layer_norm(x, (h,), w["ln1_w"], w["ln1_b"])
        qkv = (ln1 @ w["qkv"].t()).view(s, b, heads, 3, h // heads)
        q, k, v = (qkv[:, :, :, i].permute(1, 2, 0, 3) for i in range(3))
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True).permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + ctx @ w["proj"].t()
        ln2 = F.layer_norm(x, (h,), w["ln2_w"], w["ln2_b"])
        x = x + F.gelu(ln2 @ w["fc1"].t()) @ w["fc2"].t()
    loss = (x**2).sum() / (s * b * h)
    loss.backward()
    return float(loss.detach()), {f"{i}.{k}": v.grad for i, w in enumerate(weights) for k, v in w.items()}


def expected_shard(grads: dict[str, torch.Tensor], layers: int, tp: int, index: int) -> dict[str, torch.Tensor]:
    out = {}
    for i in range(layers):
        full = {k.split(".", 1)[1]: v for k, v in grads.items() if k.startswith(f"{i}.")}
        out.update({f"{i}.{k}": v for k, v in shard_weights(full, tp, index).items()})
    return out
