"""Measured activation memory against the model, per rank and layer (the analyze JSON's ``activation_memory``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..model.activation import ActivationMemoryResult
from .memory_model import ActivationModel, MemoryConfig, activation_model

# The deltas between what torch saves and the paper's count, for the notes of every report.
KNOWN_DELTAS = (
    "LayerNorm statistics: each LayerNorm also saves mean and rstd (2·s·b values; in the activation dtype on "
    "CPU; fp32 expected on CUDA, unchecked); the paper omits them; model_bytes includes them when layernorm_stat_bytes is set.",
    "F.dropout on CPU saves its mask in the activation dtype (2 bytes for bf16), not 1 byte: "
    "torch.native_dropout saves a bool mask.",
    "Fused attention kernels (flash / memory-efficient SDPA) save no s² term: Q, K, V, the output and an fp32 "
    "log-sum-exp instead of the softmax output, its mask and the dropout output.",
)


@dataclass(frozen=True, slots=True)
class LayerComparison:
    rank: int | None
    layer: int
    measured_bytes: int
    model_bytes: int
    model: str  # the parallelism the model assumed ("tp+sp", ...) and its formula

    @property
    def delta_bytes(self) -> int:
        return self.measured_bytes - self.model_bytes

    def to_dict(self) -> dict:
        return {"rank": self.rank, "layer": self.layer, "measured_bytes": self.measured_bytes,
                "model_bytes": self.model_bytes, "model": self.model, "delta_bytes": self.delta_bytes}


@dataclass(frozen=True, slots=True)
class ActivationComparison:
    layers: tuple[LayerComparison, ...]
    model: ActivationModel
    notes: tuple[str, ...] = KNOWN_DELTAS

    def to_dict(self) -> dict:
        return {"layers": [x.to_dict() for x in self.layers], "model": self.model.to_dict(),
                "notes": list(self.notes)}


def compare_activation_memory(results: Iterable[ActivationMemoryResult], config: MemoryConfig) -> ActivationComparison:
    """One row per (rank, layer) of each result's last step against ``activation_model(config)``."""
    model = activation_model(config)
    label = f"{model.name}: {model.formula}"
    rows = [LayerComparison(r.rank, layer.layer, layer.measured_bytes, model.total_bytes, label)
            for r in results for layer in r.layers]
    return ActivationComparison(tuple(sorted(rows, key=lambda x: (x.rank or 0, x.layer))), model)
