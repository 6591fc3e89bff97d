"""Measure the activation memory a model keeps for backward, per module and per layer, and the step's peak.

    with tracekit.activation_memory(model) as rec:
        loss = model(x).sum()
        loss.backward()
    rec.result().layers        # per-layer saved bytes of the (last) step

Saved tensors come from ``torch.autograd.graph.saved_tensors_hooks``; each is attributed to the innermost
module running when it was saved (a module stack kept by forward pre/post hooks) and to the layer whose
subtree holds that module (``layers=``: modules, a {index: module} mapping, or the name of a ModuleList;
default: the model's top-level children). Bytes: see :mod:`.saved_bytes` (a storage counts once while it
lives; parameters are not activations). A step with several microbatches (gradient accumulation, a pipeline
schedule) saves each microbatch's tensors anew: a layer's bytes are the sum over the step's microbatches, also
where a later microbatch reuses the addresses of an earlier one's freed storages. Peak per step: CUDA
``torch.cuda.max_memory_allocated``; CPU the profiler's ``[memory]`` allocation events, summed as deltas from
the step's start (``peak="none"`` when a profiler is already running: then call
:func:`.activation_result.peak_from_memory_events` with its events).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from ..errors import ConfigError
from ..model.activation import (
    STEP_MARKER,
    ActivationMemoryResult,
    SavedTensorRecord,
    StepActivation,
    peak_from_profiler,
    summarize_step,
)
from .saved_bytes import StorageUnion, byte_extent, is_parameter_derived, storage_key, storage_ref, tensor_ref

log = logging.getLogger("tracekit.activation")
PEAK_MODES = ("auto", "cuda", "profiler", "none")


def _layer_roots(model: torch.nn.Module, layers) -> dict[int, tuple[int, str]]:
    """id(layer module) -> (layer index, qualified name)."""
    names = {id(m): n for n, m in model.named_modules()}
    if layers is None:
        items = [m for _, m in model.named_children()] or [model]
    elif isinstance(layers, str):
        items = list(model.get_submodule(layers).children())
    elif isinstance(layers, Mapping):
        return {id(m): (int(i), names.get(id(m), str(i))) for i, m in layers.items()}
    else:
        items = list(layers)
    return {id(m): (i, names.get(id(m), str(i))) for i, m in enumerate(items)}


class ActivationMemoryRecorder:
    """Context manager that records saved-tensor bytes per module/layer and the peak memory per step."""

    def __init__(
        self,
        model: torch.nn.Module,
        layers: Iterable | Mapping | str | None = None,
        *,
        rank: int | None = None,
        peak: str = "auto",
        keep_tensors: bool = True,
    ) -> None:
        if peak not in PEAK_MODES:
            raise ConfigError(f"activation_memory: peak={peak!r} is not one of {', '.join(PEAK_MODES)}")
        self.model, self.rank, self.keep_tensors = model, rank, keep_tensors
        self._roots = _layer_roots(model, layers)
        self._names = {id(m): n or "<model>" for n, m in model.named_modules()}
        self._peak = peak if peak != "auto" else ("cuda" if _on_cuda(model) else "profiler")
        self._stack: list[torch.nn.Module] = []
        self._union = StorageUnion()
        self._records: list[SavedTensorRecord] = []
        self._steps: list[StepActivation] = []
        self._marker: Any = None
        self._active = False
        self._handles: list = []
        self._hooks: Any = None
        self._prof: Any = None
        self._cuda_base = 0
        self._failed = False

    # -- context -------------------------------------------------------------------------------------------
    def __enter__(self) -> ActivationMemoryRecorder:
        self._param_keys = {storage_key(t) for t in (*self.model.parameters(), *self.model.buffers())}
        for module in self.model.modules():
            self._handles.append(module.register_forward_pre_hook(self._push))
            self._handles.append(module.register_forward_hook(self._pop))
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._hooks.__enter__()
        if self._peak == "profiler":
            self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
            self._prof.__enter__()
        self._start_step()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._active or not self._steps:  # a trailing step() leaves an empty step open: drop it
            self._end_step()
        if self._prof is not None:
            self._prof.__exit__(*exc)
            self._fill_profiler_peaks()

    def step(self) -> None:
        """End the current step (its saved tensors and its peak) and start the next."""
        self._end_step()
        self._start_step()

    def result(self) -> ActivationMemoryResult:
        return ActivationMemoryResult(rank=self.rank, steps=tuple(self._steps), peak_source=self._peak)

    # -- hooks ---------------------------------------------------------------------------------------------
    def _push(self, module, args) -> None:
        self._active = True
        self._stack.append(module)

    def _pop(self, module, args, output) -> None:
        if self._stack and self._stack[-1] is module:
            self._stack.pop()

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """Always hands autograd the tensor: a failure to count it is one logged warning, never the run's."""
        try:
            self._count(tensor)
        except Exception as err:
            if not self._failed:
                self._failed = True
                log.warning(
                    "tracekit: rank %s: activation memory could not count a saved tensor (%s: %s); "
                    "the figures of this step undercount",
                    self.rank,
                    type(err).__name__,
                    err,
                )
        return tensor

    def _count(self, tensor: torch.Tensor) -> None:
        self._active = True
        if _in_backward() or is_parameter_derived(tensor, self._param_keys):
            return  # recomputation inside backward (checkpointing) is not what the step keeps
        try:
            key, (start, end), ref = storage_key(tensor), byte_extent(tensor), storage_ref(tensor)
        except (RuntimeError, NotImplementedError):  # no plain storage (a wrapper subclass): count its own bytes
            key, (start, end), ref = ("opaque", id(tensor)), (0, tensor.numel() * tensor.element_size()), tensor_ref(tensor)
        counted = self._union.add(key, start, end, ref)
        module = self._stack[-1] if self._stack else self.model
        layer = next((self._roots[id(m)][0] for m in reversed(self._stack) if id(m) in self._roots), None)
        self._records.append(
            SavedTensorRecord(
                module=self._names.get(id(module), type(module).__name__),
                layer=layer,
                shape=tuple(tensor.shape),
                dtype=str(tensor.dtype).removeprefix("torch."),
                nbytes=tensor.numel() * tensor.element_size(),
                counted_bytes=counted,
                produced_by=tensor.grad_fn.name() if tensor.grad_fn is not None else "",
            )
        )

    # -- steps and peaks -----------------------------------------------------------------------------------
    def _start_step(self) -> None:
        self._stack.clear()
        self._union.clear()
        self._records = []
        self._active = False
        if self._prof is not None:
            self._marker = torch.profiler.record_function(f"{STEP_MARKER}{len(self._steps)}")
            self._marker.__enter__()
        if self._peak == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._cuda_base = torch.cuda.memory_allocated()

    def _end_step(self) -> None:
        peak = over = None
        if self._peak == "cuda":
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            over = peak - self._cuda_base
        names = {i: n for i, n in self._roots.values()}
        self._steps.append(summarize_step(len(self._steps), self._records, names, peak, over, self.keep_tensors))
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None

    def _fill_profiler_peaks(self) -> None:
        self._steps = [s.with_peak(None, p) for s, p in zip(self._steps, peak_from_profiler(self._prof))]


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _in_backward() -> bool:
    return torch._C._current_graph_task_id() != -1


def _on_cuda(model: torch.nn.Module) -> bool:
    return any(p.is_cuda for p in model.parameters()) and torch.cuda.is_available()


def activation_memory(model: torch.nn.Module, layers=None, **kwargs) -> ActivationMemoryRecorder:
    """``with tracekit.activation_memory(model) as rec: ...`` then ``rec.result()``; see the module docstring."""
    return ActivationMemoryRecorder(model, layers, **kwargs)
