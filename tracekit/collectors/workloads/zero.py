"""ZeRO over the data-parallel group: ``zero3`` (parameters, gradients and update sharded, FSDP2's schedule) and
``zero1`` (the update sharded, parameters kept whole).

Each layer's (tensor-parallel local) parameters are one flat buffer, padded to a multiple of the dp group's size
D; a rank owns one contiguous 1/D of it (its *shard*) and updates only that.

``zero3``: the layer's nn.Parameters hold no data between uses. Before a layer's forward its shards are
all-gathered into a full flat buffer and the parameters become views of it; after the forward they are emptied
again (FSDP2's ``reshard_after_forward``); a hook on the layer's output all-gathers them once more before the
layer's backward. Autograd saved the Parameter objects themselves, so backward reads the re-gathered data (and
the activation-memory recorder still sees parameters, not activations). Once every gradient of the layer has
accumulated, the full gradients are reduce-scattered (sum) into the rank's gradient shard and freed.

``zero1``: parameters stay whole; after backward each layer's gradients are reduce-scattered, the shard is
updated, and the updated shards are all-gathered back into the parameters.

``overlap``: zero3 prefetches the next layer's all-gather (forward: layer i+1 while layer i computes; backward:
layer i-1 while layer i's backward runs) and leaves each reduce-scatter in flight under the backward of the
layers before it (waited in :meth:`ZeroSync.finish`). zero1 launches a layer's reduce-scatter as soon as its
gradients are ready (under the rest of backward) and each layer's parameter all-gather as soon as its shard is
updated (under the update of the next layers).

Every collective goes through :mod:`tracekit.collectors.comm` on the dp group (desc ``tracekit:dp``): annotated,
sequence-numbered, attributed. ``torch.distributed.fsdp.fully_shard`` does run on CPU with gloo in torch 2.13,
but its ``gloo:all_gather`` / ``gloo:all_reduce`` spans carry no process group (gloo records no
``record_param_comms``), so a trace of it cannot say which dimension its collectives serve.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from .. import comm


class FlatLayer:
    """One layer's parameters as a padded flat buffer split in ``world`` shards; this rank holds shard ``index``."""

    def __init__(self, module: torch.nn.Module, world: int, index: int):
        self.params = [p for _, p in module.named_parameters()]
        self.names = [n for n, _ in module.named_parameters()]
        self.shapes = [p.shape for p in self.params]
        self.numels = [p.numel() for p in self.params]
        total = sum(self.numels)
        self.world, self.index = world, index
        self.shard_numel = math.ceil(total / world)
        flat = self.flatten([p.data for p in self.params])
        self.shard = flat[index * self.shard_numel : (index + 1) * self.shard_numel].clone()
        self.grad_shard: torch.Tensor | None = None
        self.full: torch.Tensor | None = None  # zero1: the persistent whole buffer the parameters view

    def flatten(self, tensors) -> torch.Tensor:
        flat = torch.cat([t.reshape(-1) for t in tensors])
        pad = self.world * self.shard_numel - flat.numel()
        return torch.cat([flat, flat.new_zeros(pad)]) if pad else flat

    def views(self, full: torch.Tensor) -> list[torch.Tensor]:
        out, offset = [], 0
        for shape, n in zip(self.shapes, self.numels):
            out.append(full[offset : offset + n].view(shape))
            offset += n
        return out

    def set_data(self, full: torch.Tensor | None) -> None:
        """Point the parameters at ``full`` (None: empty them; their storage is freed)."""
        for p, v in zip(self.params, self.views(full) if full is not None else [None] * len(self.params)):
            p.data = v if v is not None else p.data.new_empty(0)


class ZeroSync:
    """Drives the schedule of ``stage`` (3 or 1) over ``layers`` through module and gradient hooks. The runner
    calls :meth:`finish` after backward, :meth:`update` for the optimizer step and :meth:`full_grads` for the
    equivalence tests. ``sp_group``/``sp_names``: the sequence-parallel LayerNorm gradients, all-reduced over the
    tp group before they are reduce-scattered."""

    def __init__(self, layers, stage: int, dp_group, overlap: bool, sp_group=None, sp_names=()):
        self.stage, self.group, self.overlap = stage, dp_group, overlap
        world = dist.get_world_size(dp_group) if dp_group is not None else 1
        index = dist.get_rank(dp_group) if dp_group is not None else 0
        self.sp_group, self.sp_names = sp_group, set(sp_names)
        self.flats = [FlatLayer(m, world, index) for m in layers]
        self._ready = [0] * len(self.flats)
        self._gathers: dict[int, tuple[torch.Tensor, comm.Work]] = {}  # layer -> (full buffer, in flight)
        self._scatters: list[tuple[torch.Tensor, comm.Work]] = []  # (input kept alive, in flight)
        for i, (module, flat) in enumerate(zip(layers, self.flats)):
            for p in flat.params:
                p.register_post_accumulate_grad_hook(lambda _p, i=i: self._on_grad(i))
            if stage == 1:
                # gathered in place: the parameters' storage never moves (the activation recorder tells parameters
                # by their storage; a freed one reused for an activation would hide it)
                flat.full = flat.flatten([p.data for p in flat.params])
                flat.set_data(flat.full)
            else:
                flat.set_data(None)
                module.register_forward_pre_hook(lambda _m, _a, i=i: self._pre_forward(i))
                module.register_forward_hook(lambda _m, _a, out, i=i: self._post_forward(i, out))

    # -- all-gather of parameters --------------------------------------------------------------------------
    def _start_gather(self, i: int) -> None:
        if i in self._gathers or not 0 <= i < len(self.flats):
            return
        flat = self.flats[i]
        full = flat.full if flat.full is not None else flat.shard.new_empty(flat.world * flat.shard_numel)
        if self.group is None:
            full.copy_(flat.shard)
            self._gathers[i] = (full, comm.Work(None, None))  # type: ignore[arg-type]
            return
        self._gathers[i] = (full, comm.all_gather(full, flat.shard, self.group, async_op=True))

    def _unshard(self, i: int, prefetch: int) -> None:
        self._start_gather(i)
        full, work = self._gathers.pop(i)
        if self.overlap:  # the next layer's gather runs under this layer's compute
            self._start_gather(prefetch)
        work.wait()
        self.flats[i].set_data(full)

    def _pre_forward(self, i: int) -> None:
        self._unshard(i, i + 1)

    def _post_forward(self, i: int, out: torch.Tensor) -> None:
        self.flats[i].set_data(None)
        if out.requires_grad:
            out.register_hook(lambda g, i=i: self._pre_backward(i, g))

    def _pre_backward(self, i: int, g: torch.Tensor) -> torch.Tensor:
        self._unshard(i, i - 1)
        return g

    def _wait_params(self, i: int) -> None:
        """zero1: the parameters of layer ``i``, all-gathered after its update, are complete."""
        if i in self._gathers:
            self._gathers.pop(i)[1].wait()

    # -- reduce-scatter of gradients -----------------------------------------------------------------------
    def _on_grad(self, i: int) -> None:
        flat = self.flats[i]
        self._ready[i] += 1
        if self._ready[i] < len(flat.params):
            return
        self._ready[i] = 0
        if self.sp_group is not None and self.sp_names:
            sp = [g for n, p in zip(flat.names, flat.params) if n in self.sp_names and (g := p.grad) is not None]
            grads = torch.cat([g.reshape(-1) for g in sp])
            comm.all_reduce(grads, self.sp_group)
            offset = 0
            for g in sp:
                g.copy_(grads[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
        full = flat.flatten([p.grad for p in flat.params])
        flat.grad_shard = full.new_empty(flat.shard_numel)
        if self.group is None:
            flat.grad_shard.copy_(full)
        else:
            work = comm.reduce_scatter(flat.grad_shard, full, self.group, async_op=True)
            if self.overlap:
                self._scatters.append((full, work))
            else:
                work.wait()
        for p in flat.params:
            p.grad = None
        if self.stage == 3:
            flat.set_data(None)

    def finish(self) -> None:
        """After backward: every reduce-scatter complete."""
        for _, work in self._scatters:
            work.wait()
        self._scatters.clear()

    def drain(self) -> None:
        """No parameter all-gather left in flight."""
        for i in list(self._gathers):
            self._wait_params(i)

    def update(self, lr: float) -> None:
        """SGD on the shards; zero1 then all-gathers the new parameters (overlap: each layer's gather under the
        update of the layers after it). Nothing stays in flight past the step: a gloo collective in flight while
        torch.profiler changes state can make the rank abort at interpreter exit (torch 2.13 CPU; docs/collectors.md,
        "A collective in flight across p.step()")."""
        with torch.no_grad():
            for i, flat in enumerate(self.flats):
                if flat.grad_shard is None:
                    continue
                flat.shard.add_(flat.grad_shard, alpha=-lr)
                flat.grad_shard = None
                if self.stage == 1:
                    self._start_gather(i)
                    if not self.overlap:
                        self._wait_params(i)
        self.drain()

    def full_grads(self) -> dict[str, torch.Tensor]:
        """{"<layer>.<param>": this rank's whole (tp-local) gradient}, all-gathered from the shards (tests only)."""
        out = {}
        for li, flat in enumerate(self.flats):
            assert flat.grad_shard is not None
            full = flat.grad_shard.new_empty(flat.world * flat.shard_numel)
            if self.group is None:
                full.copy_(flat.grad_shard)
            else:
                comm.all_gather(full, flat.grad_shard, self.group)
            out.update({f"{li}.{n}": v for n, v in zip(flat.names, flat.views(full))})
        return out
