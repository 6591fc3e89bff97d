"""Gradient synchronisation: bucketed all-reduce over the data-parallel group (ranks holding the same weight
shard, context-parallel ranks included), plus the sequence-parallel LayerNorm gradients over the tp group.

Buckets take parameters in reverse registration order (the order backward produces their gradients) and close
before a parameter would push them past ``bucket_numel``. Plain: every bucket is reduced after backward.
Overlap: a post-accumulate-grad hook launches a bucket's all-reduce as soon as its last gradient is ready, so it
runs under the rest of backward; ``finish()`` waits.
"""

from __future__ import annotations

import math

import torch

from .. import comm


def make_buckets(params: list[torch.nn.Parameter], bucket_numel: int) -> list[list[torch.nn.Parameter]]:
    buckets: list[list[torch.nn.Parameter]] = [[]]
    size = 0
    for p in reversed(params):
        if buckets[-1] and size + p.numel() > bucket_numel:
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += p.numel()
    return buckets


def default_bucket_numel(params: list[torch.nn.Parameter], layers: int) -> int:
    """About half a layer's parameters per bucket, so that even a tiny model has buckets to overlap."""
    return math.ceil(sum(p.numel() for p in params) / (2 * max(layers, 1)))


class GradSync:
    def __init__(
        self,
        params,
        dp_group,
        sp_group=None,
        sp_params=(),
        bucket_numel: int | None = None,
        layers: int = 1,
        overlap: bool = False,
    ):
        self.params = list(params)
        self.dp_group, self.sp_group, self.sp_params = dp_group, sp_group, list(sp_params)
        self.buckets = make_buckets(self.params, bucket_numel or default_bucket_numel(self.params, layers))
        self.overlap = overlap and dp_group is not None
        self._bucket_of = {id(p): i for i, b in enumerate(self.buckets) for p in b}
        self._ready = [0] * len(self.buckets)
        self._inflight: list[tuple[int, torch.Tensor, comm.Work]] = []
        if self.overlap:
            for p in self.params:
                p.register_post_accumulate_grad_hook(self._on_grad)

    def _on_grad(self, p) -> None:
        i = self._bucket_of[id(p)]
        self._ready[i] += 1
        if self._ready[i] == len(self.buckets[i]):
            flat = self._flatten(self.buckets[i])
            self._inflight.append((i, flat, comm.all_reduce(flat, self.dp_group, async_op=True)))

    @staticmethod
    def _flatten(params) -> torch.Tensor:
        return torch.cat([p.grad.reshape(-1) for p in params])

    @staticmethod
    def _unflatten(flat: torch.Tensor, params) -> None:
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset : offset + p.numel()].view_as(p.grad))
            offset += p.numel()

    def finish(self) -> None:
        """After backward: complete the data-parallel reduction, then the sequence-parallel one."""
        if self.dp_group is not None:
            if not self.overlap:
                for bucket in self.buckets:
                    flat = self._flatten(bucket)
                    comm.all_reduce(flat, self.dp_group)
                    self._unflatten(flat, bucket)
            for i, flat, work in self._inflight:
                work.wait()
                self._unflatten(flat, self.buckets[i])
        self._inflight.clear()
        self._ready = [0] * len(self.buckets)
        if self.sp_group is not None and self.sp_params:
            flat = self._flatten(self.sp_params)
            comm.all_reduce(flat, self.sp_group)
            self._unflatten(flat, self.sp_params)
