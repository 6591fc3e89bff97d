"""Results of an activation-memory measurement: saved tensors, per-module and per-layer bytes, step peaks."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

SCHEMA = "tracekit.activation_memory/1"
STEP_MARKER = "tracekit.activation_step#"


@dataclass(frozen=True, slots=True)
class SavedTensorRecord:
    """One tensor saved for backward. ``counted_bytes``: bytes it added (0 when its storage was already held)."""

    module: str
    layer: int | None
    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    counted_bytes: int
    produced_by: str = ""  # the grad_fn of the saved tensor ("" for a leaf or a tensor made without grad)

    def to_dict(self) -> dict:
        return {
            "module": self.module,
            "layer": self.layer,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "nbytes": self.nbytes,
            "counted_bytes": self.counted_bytes,
            "produced_by": self.produced_by,
        }


@dataclass(frozen=True, slots=True)
class ModuleActivation:
    module: str
    layer: int | None
    saved_bytes: int
    tensors: int

    def to_dict(self) -> dict:
        return {"module": self.module, "layer": self.layer, "saved_bytes": self.saved_bytes, "tensors": self.tensors}


@dataclass(frozen=True, slots=True)
class LayerActivation:
    layer: int
    name: str
    measured_bytes: int

    def to_dict(self) -> dict:
        return {"layer": self.layer, "name": self.name, "measured_bytes": self.measured_bytes}


@dataclass(frozen=True, slots=True)
class StepActivation:
    """One step: saved bytes in total, per layer and per module; peak bytes (None where not measured)."""

    step: int
    saved_bytes: int
    outside_layers_bytes: int
    layers: tuple[LayerActivation, ...]
    modules: tuple[ModuleActivation, ...]
    tensors: tuple[SavedTensorRecord, ...]
    peak_bytes: int | None = None  # CUDA: max_memory_allocated (absolute)
    peak_over_start_bytes: int | None = None  # the most allocated on top of what was live at the step's start

    def with_peak(self, peak: int | None, over: int | None) -> StepActivation:
        return replace(self, peak_bytes=peak, peak_over_start_bytes=over)

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "saved_bytes": self.saved_bytes,
            "outside_layers_bytes": self.outside_layers_bytes,
            "peak_bytes": self.peak_bytes,
            "peak_over_start_bytes": self.peak_over_start_bytes,
            "layers": [x.to_dict() for x in self.layers],
            "modules": [x.to_dict() for x in self.modules],
            "tensors": [x.to_dict() for x in self.tensors],
        }


@dataclass(frozen=True, slots=True)
class ActivationMemoryResult:
    """All steps of one rank. ``layers``/``saved_bytes`` are the last step's."""

    rank: int | None
    steps: tuple[StepActivation, ...]
    peak_source: str = ""  # "cuda" | "profiler" | "none"

    @property
    def last(self) -> StepActivation:
        return self.steps[-1]

    @property
    def layers(self) -> tuple[LayerActivation, ...]:
        return self.last.layers

    @property
    def saved_bytes(self) -> int:
        return self.last.saved_bytes

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "rank": self.rank, "peak_source": self.peak_source, "steps": [s.to_dict() for s in self.steps]}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict()))
        return path


def summarize_step(
    step: int,
    records: Sequence[SavedTensorRecord],
    layer_names: dict[int, str],
    peak: int | None,
    over: int | None,
    keep_tensors: bool = True,
) -> StepActivation:
    """Sum the records of one step by module and by layer (every layer listed, zero when it saved nothing)."""
    per_module: dict[tuple[str, int | None], list[int]] = {}
    per_layer = {i: 0 for i in layer_names}
    outside = 0
    for r in records:
        acc = per_module.setdefault((r.module, r.layer), [0, 0])
        acc[0] += r.counted_bytes
        acc[1] += 1
        if r.layer is None:
            outside += r.counted_bytes
        else:
            per_layer[r.layer] = per_layer.get(r.layer, 0) + r.counted_bytes
    modules = tuple(ModuleActivation(m, layer, b, n) for (m, layer), (b, n) in per_module.items())
    layers = tuple(LayerActivation(i, layer_names.get(i, str(i)), b) for i, b in sorted(per_layer.items()))
    total = sum(r.counted_bytes for r in records)
    return StepActivation(step, total, outside, layers, modules, tuple(records) if keep_tensors else (), peak, over)


def peak_from_memory_events(events: Iterable[tuple[int, int]], windows: Sequence[tuple[int, int]]) -> list[int]:
    """Peak bytes above each window's start from allocation deltas [(ts_ns, +alloc / -free bytes)].

    The profiler's ``[memory]`` events carry deltas; summed in time order inside a window they give the bytes
    allocated on top of what was live when the window began, whose maximum is the window's peak (>= 0).
    """
    ordered = sorted(events)
    peaks = []
    for start, end in windows:
        level = peak = 0
        for ts, delta in ordered:
            if start <= ts <= end:
                level += delta
                peak = max(peak, level)
        peaks.append(peak)
    return peaks


def peak_from_profiler(prof) -> list[int]:
    """Per-step peaks from a finished ``torch.profiler.profile(profile_memory=True)`` with tracekit step markers."""
    events = prof.profiler.kineto_results.events()
    windows = sorted((e.start_ns(), e.end_ns()) for e in events if e.name().startswith(STEP_MARKER))
    memory = [(e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]"]
    return peak_from_memory_events(memory, windows)


@dataclass(frozen=True, slots=True)
class ActivationFiles:
    """The activation-memory files the loader found beside a run's traces (``activation_r{rank}.json``), read:
    ``found`` every file listed, ``results`` those that read, ``warnings`` one line per file that did not."""

    found: tuple[str, ...] = ()
    results: tuple[ActivationMemoryResult, ...] = ()
    warnings: tuple[str, ...] = ()
