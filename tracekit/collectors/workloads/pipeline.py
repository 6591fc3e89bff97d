"""Pipeline parallelism: the layers cut into ``pp`` stages, run with the 1F1B schedule over ``microbatches``.

The stages, their links and the point-to-point sends are :mod:`.pipeline_mesh`'s.

Schedule (PipeDream-flush, Megatron's non-interleaved 1F1B): stage s runs min(p-s-1, m) warm-up forwards,
then one forward and one backward alternately, then the remaining backwards; it holds at most p-s microbatches'
activations. Plain: at each boundary between two actions the send of the finished action's output and the
receive of the next action's input are posted together and both waited (Megatron's batched p2p; no buffering,
no deadlock). ``--overlap``: the receive of the next action's input is posted before the current action
computes, and sends are waited only when the step ends.
"""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch.profiler import record_function

from .. import comm
from ..saved_bytes import StorageUnion, byte_extent, is_parameter_derived, storage_key
from .config import WorkloadConfig
from .delay import host_delay, step_delay_ms
from .dp import GradSync
from .layer import Layer, Parallel, full_input, full_weights, local_positions, shard_input, shard_weights
from .pipeline_mesh import build_stage, inner_layout, p2p
from .profiled import run_steps


def schedule(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """1F1B: the actions ("F" forward, "B" backward, microbatch) stage ``stage`` runs in order."""
    warm = min(stages - stage - 1, microbatches)
    acts = [("F", i) for i in range(warm)]
    for k in range(microbatches - warm):
        acts += [("F", warm + k), ("B", k)]
    return acts + [("B", k) for k in range(microbatches - warm, microbatches)]


class InFlight:
    """Saved-activation bytes of each microbatch from the end of its forward to the end of its backward, and
    the peak number and bytes held at once. Bytes are counted as the activation recorder counts them (a storage
    once, parameters left out); the hooks chain to any outer saved-tensor hooks (the recorder's), so both see
    every tensor."""

    def __init__(self, model: torch.nn.Module):
        self._params = {storage_key(t) for t in (*model.parameters(), *model.buffers())}
        self.live: dict[int, int] = {}
        self.microbatch_bytes: list[int] = []
        self.peak_count = self.peak_bytes = 0

    @staticmethod
    def available() -> bool:
        """Chaining needs torch's view of the hooks in force; without it nothing is counted (the recorder
        must keep seeing every saved tensor)."""
        return hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks")

    @contextlib.contextmanager
    def forward(self, mb: int):
        union = StorageUnion()
        outer = torch._C._autograd._top_saved_tensors_default_hooks(True)

        def pack(t):
            if not is_parameter_derived(t, self._params):
                union.add(storage_key(t), *byte_extent(t))
            return outer[0](t) if outer else t

        def unpack(x):
            return outer[1](x) if outer else x

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield
        self.live[mb] = union.total_bytes()
        self.microbatch_bytes.append(self.live[mb])
        self.peak_count = max(self.peak_count, len(self.live))
        self.peak_bytes = max(self.peak_bytes, sum(self.live.values()))

    def backward_done(self, mb: int) -> None:
        self.live.pop(mb, None)


def _wait(work: comm.Work | None) -> None:
    if work is not None:
        work.wait()


class _LastMicrobatchSync(GradSync):
    """Data-parallel buckets launch from the gradient hooks only during the last microbatch's backward (earlier
    backwards accumulate partial gradients)."""

    armed = False

    def _on_grad(self, p) -> None:
        if self.armed:
            super()._on_grad(p)


class Pipeline:
    """One rank's stage: its layers, microbatches and the 1F1B step."""

    def __init__(self, cfg: WorkloadConfig, device):
        lay = cfg.validate()
        self.cfg, self.stage = cfg, build_stage(lay)
        inner, st = inner_layout(lay), self.stage
        dpi, cpi, tpi = st.local // (inner.tp * inner.cp), (st.local // inner.tp) % inner.cp, st.local % inner.tp
        self.coords = (dpi, cpi, tpi)
        g = st.groups
        par = Parallel(inner, g.tp, g.cp, tpi, cpi, cfg.chunks if cfg.overlap else 1)
        self.par = par
        per = cfg.layers // lay.pp
        self.first_layer = st.index * per
        self.layers = torch.nn.ModuleList(
            Layer(
                shard_weights(full_weights(cfg.hidden, self.first_layer + i, cfg.seed), inner.tp, tpi),
                cfg.heads,
                par,
                cfg.seq,
                cfg.dropout,
                cfg.torch_dtype,
                device,
            )
            for i in range(per)
        )
        x = shard_input(full_input(cfg.seq, cfg.batch, cfg.hidden, cfg.seed), par, inner.dp, dpi)
        self.micro = [c.to(device=device, dtype=cfg.torch_dtype).contiguous() for c in x.chunk(cfg.microbatches, dim=1)]
        self.pos = local_positions(cfg.seq, par, device)
        params = list(self.layers.parameters())
        sp = par.sequence_parallel and inner.tp > 1
        sp_params = [getattr(m, n) for m in self.layers for n in Layer.LN_PARAMS] if sp else []
        self.sync = _LastMicrobatchSync(params, g.dp, g.tp if sp_params else None, sp_params, cfg.bucket_numel, per, cfg.overlap)
        self.params = params
        self.acts = schedule(st.index, st.size, cfg.microbatches)
        self.norm = cfg.seq * cfg.batch * cfg.hidden
        self.in_flight = InFlight(self.layers) if cfg.activation_memory and InFlight.available() else None

    # -- communication ---------------------------------------------------------------------------------------
    def _recv(self, act: tuple[str, int]) -> tuple[torch.Tensor, comm.Work] | None:
        kind, _ = act
        group = self.stage.act_in if kind == "F" else self.stage.grad_in
        if group is None:
            return None
        buf = torch.empty_like(self.micro[0])
        return buf, p2p(buf, group, send=False)

    def _send(self, act: tuple[str, int], out: torch.Tensor | None) -> comm.Work | None:
        group = self.stage.act_out if act[0] == "F" else self.stage.grad_out
        return None if group is None or out is None else p2p(out.detach(), group, send=True)

    # -- compute ---------------------------------------------------------------------------------------------
    def _forward(self, mb: int, x: torch.Tensor | None, state: dict) -> torch.Tensor:
        if x is None:
            x = self.micro[mb]
        else:
            x.requires_grad_()
        with record_function(f"pp:forward|mb={mb}"), self.in_flight.forward(mb) if self.in_flight else contextlib.nullcontext():
            y = x
            for layer in self.layers:
                y = layer(y, self.pos)
            if self.stage.last:
                y = (y.float() ** 2).sum() / self.norm
        state[mb] = (x, y)
        return y

    def _backward(self, mb: int, grad: torch.Tensor | None, state: dict) -> torch.Tensor | None:
        x, y = state.pop(mb)
        if mb == self.cfg.microbatches - 1:
            self.sync.armed = True
        with record_function(f"pp:backward|mb={mb}"):
            torch.autograd.backward(y, grad)
        if self.in_flight is not None:
            self.in_flight.backward_done(mb)
        return x.grad if not self.stage.first else None

    def _run(self, act: tuple[str, int], data: torch.Tensor | None, state: dict) -> tuple[torch.Tensor | None, float]:
        """Run one action; returns what it sends on (None for the last stage's forward) and its loss."""
        if act[0] == "B":
            return self._backward(act[1], data, state), 0.0
        out = self._forward(act[1], data, state)
        return (None, float(out.detach())) if self.stage.last else (out, 0.0)

    def step(self) -> float:
        """One training step over every microbatch; returns this stage's loss (0 off the last stage)."""
        for p in self.params:
            p.grad = None
        self.sync.armed = False
        state: dict = {}
        loss = 0.0
        sends: list = []
        pending = self._recv(self.acts[0])
        for k, act in enumerate(self.acts):
            got, nxt = pending, self.acts[k + 1] if k + 1 < len(self.acts) else None
            if self.cfg.overlap and nxt is not None:
                pending = self._recv(nxt)  # posted before this action computes
            if got is not None:
                got[1].wait()
            out, part = self._run(act, got[0] if got is not None else None, state)
            loss += part
            sends.append(self._send(act, out))
            if not self.cfg.overlap:  # this boundary's send and the next receive in flight together, then waited
                pending = self._recv(nxt) if nxt is not None else None
                _wait(sends.pop())
        for work in sends:
            _wait(work)
        self.sync.finish()
        return loss

    def grads(self) -> dict:
        return {
            f"{self.first_layer + li}.{n}": p.grad.float().cpu().numpy()
            for li, m in enumerate(self.layers)
            for n, p in m.named_parameters()
            if p.grad is not None
        }

    def update(self) -> None:
        with torch.no_grad():
            for p in self.params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-1e-3)

    def report(self) -> dict:
        """This stage's schedule figures for the run result."""
        st, m = self.stage, self.cfg.microbatches
        d: dict[str, object] = {
            "stage": st.index,
            "stages": st.size,
            "microbatches": m,
            "model_in_flight": min(st.size - st.index, m),
        }
        if self.in_flight is not None:
            d.update(
                peak_in_flight=self.in_flight.peak_count,
                peak_in_flight_bytes=self.in_flight.peak_bytes,
                microbatch_bytes=self.in_flight.microbatch_bytes[-m:],
            )
        return d


def train_pipeline(cfg: WorkloadConfig, out_dir, profiled: bool, return_state: bool, device) -> dict:
    """The runner's ``train`` for a layout with pp > 1: the same result dict, plus ``pipeline`` (see report)."""
    pipe = Pipeline(cfg, device)
    losses: list[float] = []
    state: dict = {}

    delay = step_delay_ms(cfg, dist.get_rank())

    def one_step(i: int) -> None:
        if delay is not None:  # `tracekit run --delay`: before any of the step's sends and receives
            host_delay(delay)
        loss = pipe.step()
        losses.append(loss)
        if i == 0 and return_state:
            state.update(loss=loss, grads=pipe.grads(), stage=pipe.stage.index)
        pipe.update()

    overhead, traces, activation = run_steps(
        cfg, out_dir, profiled, one_step, layout=pipe.stage.groups, model=pipe.layers, device=device
    )
    par = pipe.par
    return {
        "rank": dist.get_rank(),
        "coords": pipe.coords,
        "losses": losses,
        "overhead": overhead,
        "traces": traces,
        "comm": {f"{d}|{op}": list(v) for (d, op), v in comm.stats().items()},
        "state": state,
        "activation": activation,
        "pipeline": pipe.report(),
        "replica": pipe.stage.last and (pipe.coords[2] == 0 or par.sequence_parallel),
    }
