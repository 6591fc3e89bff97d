"""Autograd pieces of the parallel layer: Megatron column/row-parallel linears and collectives in autograd.

Tensors are [sequence, batch, features]. A linear is ``y = x @ w.T`` with ``w`` [out, in].

Column-parallel (``w`` split along ``out``), mode ``tp``: input replicated, backward all-reduces the input
gradient; mode ``sp``: input sharded along the sequence, forward all-gathers it and saves only the shard,
backward all-gathers it again and reduce-scatters the input gradient. Row-parallel (``w`` split along
``in``), mode ``tp``: forward all-reduces the output; mode ``sp``: forward reduce-scatters it, backward all-gathers the gradient.

Overlap (``chunks > 1``): the sequence is cut into chunks and each chunk's collective runs while the next
chunk's GEMM computes (column ``sp`` forward all-gather, row forward all-reduce / reduce-scatter); the column
backward launches its input-gradient collective and computes the weight gradient under it.
"""

from __future__ import annotations

import torch

from .. import comm


def _size(group) -> int:
    import torch.distributed as dist

    return 1 if group is None else dist.get_world_size(group)


def _chunk_rows(x_full: torch.Tensor, world: int, chunks: int, c: int) -> torch.Tensor:
    """Chunk ``c`` of every rank's shard of a rank-major sequence: [world * s/(world*chunks), ...]."""
    s = x_full.shape[0]
    per = s // (world * chunks)
    return x_full.view(world, chunks, per, *x_full.shape[1:])[:, c].reshape(world * per, *x_full.shape[1:])


def _unchunk(parts: list[torch.Tensor], world: int) -> torch.Tensor:
    """Inverse of :func:`_chunk_rows` over all chunks: rank-major full sequence."""
    per = parts[0].shape[0] // world
    stacked = torch.stack([p.view(world, per, *p.shape[1:]) for p in parts], dim=1)
    return stacked.reshape(world * len(parts) * per, *parts[0].shape[1:])


def gather_seq(x: torch.Tensor, group, chunks: int = 1, fn=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """All-gather ``x`` along the sequence; with ``chunks > 1`` pipeline it with ``fn`` (a GEMM) chunk by chunk.
    Returns (gathered input, fn(gathered) or None)."""
    world = _size(group)
    if chunks <= 1:
        full = x.new_empty(world * x.shape[0], *x.shape[1:])
        comm.all_gather(full, x, group)
        return full, (fn(full) if fn else None)
    pieces = list(x.chunk(chunks, dim=0))
    bufs = [x.new_empty(world * p.shape[0], *p.shape[1:]) for p in pieces]
    works = [comm.all_gather(bufs[0], pieces[0], group, async_op=True)]
    outs = []
    for c in range(chunks):
        if c + 1 < chunks:
            works.append(comm.all_gather(bufs[c + 1], pieces[c + 1], group, async_op=True))
        works[c].wait()
        outs.append(fn(bufs[c]))
    return _unchunk(bufs, world), _unchunk(outs, world)


class ColumnParallel(torch.autograd.Function):
    """Saves its input as it came in: under SP the sequence SHARD, all-gathered again in backward (Megatron's
    ``LinearWithGradAccumulationAndAsyncCommunication`` with ``sequence_parallel``), so the QKV and FC1 inputs
    cost sbh/t, not sbh, of activation memory."""

    @staticmethod
    def forward(ctx, x, w, mode, group, chunks):
        ctx.mode, ctx.group, ctx.overlap = mode, group, chunks > 1
        if group is not None and mode == "sp":
            y = gather_seq(x, group, chunks, lambda t: t @ w.t())[1]
        else:
            y = x @ w.t()
        ctx.save_for_backward(x, w)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gather = None
        if ctx.group is not None and ctx.mode == "sp":  # re-gather the input; overlap: under the grad_x GEMM
            x_full = x.new_empty(_size(ctx.group) * x.shape[0], *x.shape[1:])
            gather = comm.all_gather(x_full, x, ctx.group, async_op=True)
            if not ctx.overlap:
                gather.wait()
        else:
            x_full = x
        grad_x = g @ w
        if gather is not None and ctx.overlap:
            gather.wait()
        work, out = None, grad_x
        if ctx.group is not None:
            if ctx.mode == "sp":
                out = grad_x.new_empty(grad_x.shape[0] // _size(ctx.group), *grad_x.shape[1:])
                work = comm.reduce_scatter(out, grad_x, ctx.group, async_op=True)
            else:
                work = comm.all_reduce(grad_x, ctx.group, async_op=True)
            if not ctx.overlap:
                work.wait()
        grad_w = g.reshape(-1, g.shape[-1]).t() @ x_full.reshape(-1, x_full.shape[-1])
        if work is not None:
            work.wait()
        return out, grad_w, None, None, None


class RowParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, mode, group, chunks):
        ctx.mode, ctx.group = mode, group
        ctx.save_for_backward(x, w)
        if group is None:
            return x @ w.t()
        world = _size(group)
        if chunks <= 1:
            return _reduce_out(x @ w.t(), mode, group, world, False)[0]
        outs, works = [], []
        for c in range(chunks):
            xc = _chunk_rows(x, world, chunks, c) if mode == "sp" else x.chunk(chunks, dim=0)[c]
            y, work = _reduce_out(xc @ w.t(), mode, group, world, True)
            outs.append(y)
            works.append(work)
        for work in works:
            work.wait()
        return torch.cat(outs, dim=0)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        if ctx.group is not None and ctx.mode == "sp":
            g, _ = gather_seq(g, ctx.group)
        grad_x = g @ w
        grad_w = g.reshape(-1, g.shape[-1]).t() @ x.reshape(-1, x.shape[-1])
        return grad_x, grad_w, None, None, None


def _reduce_out(y, mode, group, world, async_op):
    if mode == "sp":
        out = y.new_empty(y.shape[0] // world, *y.shape[1:])
        return out, comm.reduce_scatter(out, y, group, async_op=async_op)
    return y, comm.all_reduce(y, group, async_op=async_op)


class StartExchange(torch.autograd.Function):
    """Launch an exchange and return its output; ``handle`` receives the Work, which the caller waits on
    before reading the output. ``kind``: "all_to_all" (equal split along dim 0, ``x`` is [world, ...];
    backward: the same all-to-all) or "ring" (receive from the previous rank, send to the next; backward
    shifts the gradient the other way). Backward runs synchronously."""

    @staticmethod
    def forward(ctx, x, group, handle, kind):
        ctx.group, ctx.kind = group, kind
        x = x.contiguous()
        out = torch.empty_like(x)
        handle.append(_exchange(kind, out, x, group, async_op=True))
        return out

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        out = torch.empty_like(g)
        _exchange(ctx.kind, out, g, ctx.group, reverse=True)
        return out, None, None, None


def _exchange(kind: str, out, x, group, *, async_op: bool = False, reverse: bool = False):
    if kind == "all_to_all":
        return comm.all_to_all(out, x, group, async_op=async_op)
    return comm.ring_shift(out, x, group, async_op=async_op, reverse=reverse)


def _start(kind: str, x, group, wait: bool):
    handle: list = []
    out = StartExchange.apply(x, group, handle, kind)
    if wait:
        handle[0].wait()
    return out, handle[0]


def all_to_all(x, group, wait: bool = True):
    return _start("all_to_all", x, group, wait)


def ring_shift(x, group, wait: bool = True):
    return _start("ring", x, group, wait)
