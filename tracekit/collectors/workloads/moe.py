"""Expert parallelism: the layer's MLP replaced by a mixture of experts whose experts are spread over the ep group.

    x -> ... attention as layer.py ... -> LN -> router -> top-k -> dispatch (all-to-all) -> experts
      -> combine (all-to-all) -> gate-weighted sum -> dropout -> +

Routing, on each rank's own tokens (its [s_local, b_local] in s-major order): fp32 logits ``x @ router.T`` and
softmax; a token's ``top_k`` experts are the largest probabilities, ties going to the lower expert index (a
stable sort, so the choice is deterministic); its gates are those probabilities, not renormalised (the router
learns even at k = 1). Capacity: an expert takes at most ``ceil(capacity_factor x tokens x top_k / experts)``
of a rank's token choices, filled in priority order -- every token's first choice in token order, then every
second choice (GShard's order) -- and a choice past the capacity is dropped (it adds nothing; the residual
carries the token).

Expert ``e`` lives on ep rank ``e // (experts / ep)``. A rank first exchanges how many rows it sends to each
expert (an equal-split all-to-all of counts), then sends the rows with ``all_to_all_single`` and split sizes
(rows per peer: routing imbalance shows in the bytes and in the wait), the owners run their experts
(Linear -> GELU -> Linear, 4h wide) and the rows come back with the reverse splits. Backward is the same two
exchanges on the gradients.

``--overlap`` (DeepEP / DualPipe style): the rank's tokens are cut into ``chunks`` micro-chunks, and the dispatch
of chunk c+1 and the combine of chunk c-1 are in flight while the experts compute chunk c; backward pipelines the
gradient exchanges under the expert backward the same way.

Every exchange is logged (``split_log``: layer, step, phase, chunk, group name, sequence number, split sizes,
bytes per row) and the runner writes the log beside the traces as ``ep_splits_r{rank}.jsonl`` (one exchange a
line), so the bytes the analysis reports can be checked against the routing that produced them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .. import comm
from .dp import GradSync
from .layer import Layer, Parallel, full_weights, shard_weights

EXPERT_PARAMS = ("w1", "w2")
SPLIT_LOG_NAME = "ep_splits_r{rank}.jsonl"  # not *.json: the loader takes those for traces


@dataclass(frozen=True, slots=True)
class MoEParallel:
    """How one rank runs the experts: its ep group (None: all experts local) and the routing parameters."""

    group: object = None
    size: int = 1
    index: int = 0
    experts: int = 4
    top_k: int = 2
    capacity_factor: float = 1.25
    chunks: int = 1  # > 1: overlap variant

    @property
    def local_experts(self) -> int:
        return self.experts // self.size


def moe_weights(hidden: int, experts: int, layer: int, seed: int) -> dict[str, torch.Tensor]:
    """Router [E, h] and every expert's weights w1 [E, 4h, h], w2 [E, h, 4h], fp32, identical on every rank."""
    g = torch.Generator().manual_seed(seed * 1000 + 500 + layer)
    f = 4 * hidden
    return {
        "router": torch.randn(experts, hidden, generator=g) / hidden**0.5,
        "w1": torch.randn(experts, f, hidden, generator=g) / hidden**0.5,
        "w2": torch.randn(experts, hidden, f, generator=g) / f**0.5,
    }


def local_expert_weights(full: dict[str, torch.Tensor], ep: int, index: int) -> dict[str, torch.Tensor]:
    """The router (replicated) and this ep rank's contiguous block of experts."""
    return {"router": full["router"], "w1": full["w1"].chunk(ep, dim=0)[index], "w2": full["w2"].chunk(ep, dim=0)[index]}


def route(x2d: torch.Tensor, router: torch.Tensor, top_k: int, capacity_factor: float):
    """(experts [T, k], gates [T, k] fp32, keep [T, k] bool, capacity) for this rank's tokens ``x2d`` [T, h]."""
    probs = torch.softmax(x2d.float() @ router.float().t(), dim=-1)
    tokens, n_experts = probs.shape
    experts = torch.sort(-probs.detach(), dim=-1, stable=True).indices[:, :top_k].contiguous()  # ties: lower index
    gates = probs.gather(1, experts)
    capacity = math.ceil(capacity_factor * tokens * top_k / n_experts)
    priority = experts.t().reshape(-1)  # first choices in token order, then second choices, ...
    position = (F.one_hot(priority, n_experts).cumsum(0) - 1).gather(1, priority[:, None]).squeeze(1)
    keep = (position < capacity).view(top_k, tokens).t()
    return experts, gates, keep, capacity


@dataclass(slots=True)
class Plan:
    """Which rows go where. Rows are sent chunk by chunk, within a chunk by expert, within an expert in
    priority order; the owner receives them by source rank, then by its local expert."""

    row_token: torch.Tensor  # [N] token of each sent row
    row_choice: torch.Tensor  # [N] flat index t * k + j of its (token, choice) in the gates
    chunk_rows: list[int]  # rows sent per chunk
    in_splits: list[list[int]]  # per chunk: rows sent to each ep rank
    out_splits: list[list[int]]  # per chunk: rows received from each ep rank
    expert_rows: list[list[torch.Tensor]] = field(default_factory=list)  # per chunk, per local expert: received rows


def make_plan(experts: torch.Tensor, keep: torch.Tensor, moe: MoEParallel, log) -> Plan:
    tokens, k = experts.shape
    n, chunks, size, local, dev = moe.experts, moe.chunks, moe.size, moe.local_experts, experts.device
    token = torch.arange(tokens, device=dev).repeat_interleave(k)
    choice_slot = torch.arange(k, device=dev).repeat(tokens)
    expert = experts.reshape(-1)
    chunk = token * chunks // tokens
    kept = torch.nonzero(keep.reshape(-1)).squeeze(1)
    key = ((chunk * n + expert) * k + choice_slot) * tokens + token
    order = kept[torch.argsort(key[kept])]
    counts = torch.zeros(chunks, n, dtype=torch.int64, device=dev)
    counts.index_put_((chunk[order], expert[order]), torch.ones_like(order), accumulate=True)
    send = counts.view(chunks, size, local).permute(1, 0, 2).contiguous()  # [peer, chunk, local expert]
    recv = send
    if moe.group is not None:
        recv = torch.empty_like(send)
        work = comm.all_to_all(recv, send, moe.group)
        log(work.annotation, "counts", -1, [send[0].numel()] * size, [send[0].numel()] * size, 8)
    send, recv = send.cpu(), recv.cpu()  # split sizes are host lists (on a GPU: the one sync of the layer)
    plan = Plan(
        token[order],
        order,
        counts.sum(1).tolist(),
        [send[:, c].sum(1).tolist() for c in range(chunks)],
        [recv[:, c].sum(1).tolist() for c in range(chunks)],
    )
    for c in range(chunks):
        starts = [0, *recv[:, c].reshape(-1).cumsum(0).tolist()]
        rows: list[list[torch.Tensor]] = [[] for _ in range(local)]
        for i in range(size * local):
            rows[i % local].append(torch.arange(starts[i], starts[i + 1], device=dev))
        plan.expert_rows.append([torch.cat(r) for r in rows])
    return plan


def _exchange(x: torch.Tensor, out_split: list[int], in_split: list[int], group, log, phase: str, chunk: int):
    """Rows of ``x`` to their peers (``in_split`` rows each), ``out_split`` rows back from each; async."""
    if group is None:
        return x, None
    out = x.new_empty(sum(out_split), *x.shape[1:])
    work = comm.all_to_all(out, x, group, async_op=True, out_split=out_split, in_split=in_split)
    log(work.annotation, phase, chunk, in_split, out_split, math.prod(x.shape[1:]) * x.element_size())
    return out, work


def pipeline(parts: list[torch.Tensor], plan: Plan, group, log, phases: tuple[str, str], fn) -> list[torch.Tensor]:
    """For each chunk: send its rows to the expert owners, ``fn(chunk, received)``, send the result back. With
    several chunks, the next chunk's dispatch and the previous chunk's combine run under ``fn``."""
    overlap, n = len(parts) > 1, len(parts)
    there = lambda c: _exchange(parts[c], plan.out_splits[c], plan.in_splits[c], group, log, phases[0], c)
    pending, backs = there(0), []
    for c in range(n):
        following = there(c + 1) if overlap and c + 1 < n else None
        received, work = pending
        if work is not None:
            work.wait()
        back = _exchange(fn(c, received), plan.in_splits[c], plan.out_splits[c], group, log, phases[1], c)
        if back[1] is not None and not overlap:
            back[1].wait()
        backs.append(back)
        pending = following if overlap else (there(c + 1) if c + 1 < n else None)
    for _, work in backs:
        if work is not None:
            work.wait()
    return [b for b, _ in backs]


def _experts_forward(x, w1, w2, expert_rows, saved: list) -> torch.Tensor:
    out, pre = torch.empty_like(x), x.new_empty(x.shape[0], w1.shape[1])
    for e, rows in enumerate(expert_rows):
        if len(rows):
            pre[rows] = x[rows] @ w1[e].t()
            out[rows] = F.gelu(pre[rows]) @ w2[e].t()
    saved.append(pre)
    return out


def _experts_backward(g, x, pre, w1, w2, expert_rows, gw1, gw2) -> torch.Tensor:
    gx = torch.empty_like(x)
    for e, rows in enumerate(expert_rows):
        if len(rows):
            ge, he = g[rows], pre[rows]
            gw2[e] += ge.t() @ F.gelu(he)
            gh = torch.ops.aten.gelu_backward(ge @ w2[e], he)
            gw1[e] += gh.t() @ x[rows]
            gx[rows] = gh @ w1[e]
    return gx


class DispatchExpertsCombine(torch.autograd.Function):
    """Rows in send order -> expert outputs in send order. Saves the received rows and the experts'
    pre-activations (4h) for backward."""

    @staticmethod
    def forward(ctx, send, w1, w2, plan, group, log):
        ctx.plan, ctx.group, ctx.log = plan, group, log
        received: list[torch.Tensor] = []
        pre: list[torch.Tensor] = []

        def compute(c, x):
            received.append(x)
            return _experts_forward(x, w1, w2, plan.expert_rows[c], pre)

        out = pipeline(list(send.split(plan.chunk_rows)), plan, group, log, ("dispatch", "combine"), compute)
        ctx.save_for_backward(w1, w2, *received, *pre)
        return torch.cat(out)

    @staticmethod
    def backward(ctx, g):
        w1, w2, *rest = ctx.saved_tensors
        n = len(rest) // 2
        received, pre = rest[:n], rest[n:]
        plan = ctx.plan
        gw1, gw2 = torch.zeros_like(w1), torch.zeros_like(w2)
        back = lambda c, gy: _experts_backward(gy, received[c], pre[c], w1, w2, plan.expert_rows[c], gw1, gw2)
        parts = list(g.contiguous().split(plan.chunk_rows))
        grad = pipeline(parts, plan, ctx.group, ctx.log, ("dispatch_grad", "combine_grad"), back)
        return torch.cat(grad), gw1, gw2, None, None, None


class MoELayer(Layer):
    """layer.py's transformer layer with the MLP replaced by the mixture of experts."""

    router: nn.Parameter
    w1: nn.Parameter
    w2: nn.Parameter

    def __init__(
        self,
        weights,
        heads: int,
        par: Parallel,
        seq: int,
        moe: MoEParallel,
        index: int,
        dropout: float = 0.0,
        dtype=torch.float32,
        device=None,
    ):
        super().__init__(weights, heads, par, seq, dropout, dtype, device)
        self.moe, self.index, self.calls = moe, index, 0
        self.split_log: list[dict] = []

    def _mlp(self, ln2: torch.Tensor) -> torch.Tensor:
        step, self.calls = self.calls, self.calls + 1

        def log(ann, phase, chunk, in_split, out_split, row_bytes):
            self.split_log.append(
                {
                    "layer": self.index,
                    "step": step,
                    "phase": phase,
                    "chunk": chunk,
                    "pg_name": ann.pg_name,
                    "seq": ann.seq,
                    "in_split": list(in_split),
                    "out_split": list(out_split),
                    "row_bytes": int(row_bytes),
                }
            )

        shape = ln2.shape
        x2d = ln2.reshape(-1, shape[-1])
        experts, gates, keep, _ = route(x2d, self.router, self.moe.top_k, self.moe.capacity_factor)
        plan = make_plan(experts, keep, self.moe, log)
        rows = DispatchExpertsCombine.apply(x2d[plan.row_token], self.w1, self.w2, plan, self.moe.group, log)
        weighted = rows * gates.reshape(-1)[plan.row_choice].to(rows.dtype)[:, None]
        # index_put, not index_add: index_add saves its whole source (N x h) for backward, index_put the indices
        return torch.zeros_like(x2d).index_put((plan.row_token,), weighted, accumulate=True).view(shape)


def build_layers(cfg, lay, groups, par: Parallel, tp_index: int, device) -> nn.ModuleList:
    """This rank's MoE layers: its tensor-parallel shard of the attention, the router, its block of experts."""
    ep_index = dist.get_rank(groups.ep) if groups.ep is not None else 0
    moe = MoEParallel(groups.ep, lay.ep, ep_index, cfg.experts, cfg.top_k, cfg.capacity_factor, cfg.chunks if cfg.overlap else 1)
    layers = []
    for i in range(cfg.layers):
        weights = shard_weights(full_weights(cfg.hidden, i, cfg.seed), lay.tp, tp_index)
        del weights["fc1"], weights["fc2"]
        weights.update(local_expert_weights(moe_weights(cfg.hidden, cfg.experts, i, cfg.seed), lay.ep, ep_index))
        layers.append(MoELayer(weights, cfg.heads, par, cfg.seq, moe, i, cfg.dropout, cfg.torch_dtype, device))
    return nn.ModuleList(layers)


def grad_syncs(cfg, groups, par: Parallel, layers) -> list[GradSync]:
    """Dense parameters (attention, LayerNorms, router) all-reduce over dp as today; experts over the ranks
    holding the same experts (edp). Under sequence parallelism the router and the experts saw only this rank's
    sequence shard, so their gradients are summed over tp too, as the LayerNorms' are."""
    named = [(n, p) for m in layers for n, p in m.named_parameters()]
    dense = [p for n, p in named if n not in EXPERT_PARAMS]
    expert = [p for n, p in named if n in EXPERT_PARAMS]
    sp = par.sequence_parallel and par.tp > 1
    tp_group = groups.tp if sp else None
    dense_sp = [p for n, p in named if n in (*Layer.LN_PARAMS, "router")] if sp else []
    return [
        GradSync(dense, groups.dp, tp_group, dense_sp, cfg.bucket_numel, cfg.layers, cfg.overlap),
        GradSync(expert, groups.edp, tp_group, expert if sp else [], cfg.bucket_numel, cfg.layers, cfg.overlap),
    ]


def write_split_log(layers, out_dir, rank: int) -> Path:
    """``ep_splits_r{rank}.jsonl``: every exchange of the run, one JSON object a line, in issue order."""
    path = Path(out_dir) / SPLIT_LOG_NAME.format(rank=rank)
    entries = sorted((e for m in layers for e in getattr(m, "split_log", [])), key=lambda e: (e["pg_name"], e["seq"]))
    path.write_text("".join(json.dumps({"rank": rank, **e}) + "\n" for e in entries))
    return path
