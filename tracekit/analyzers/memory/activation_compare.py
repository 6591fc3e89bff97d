"""Measured activation memory against the model, per rank and layer (the analyze JSON's ``activation_memory``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...model.activation import ActivationMemoryResult
from .activation_model import ActivationModel, MemoryConfig, ModelTerm, activation_model, embedding_output_terms
from .bill_of_materials import SavedTensorSpec, bill_of_materials

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
        return {
            "rank": self.rank,
            "layer": self.layer,
            "measured_bytes": self.measured_bytes,
            "model_bytes": self.model_bytes,
            "model": self.model,
            "delta_bytes": self.delta_bytes,
        }


@dataclass(frozen=True, slots=True)
class ActivationComparison:
    layers: tuple[LayerComparison, ...]
    model: ActivationModel
    notes: tuple[str, ...] = KNOWN_DELTAS

    def to_dict(self) -> dict:
        return {"layers": [x.to_dict() for x in self.layers], "model": self.model.to_dict(), "notes": list(self.notes)}


def compare_activation_memory(results: Iterable[ActivationMemoryResult], config: MemoryConfig) -> ActivationComparison:
    """One row per (rank, layer) of each result's last step against ``activation_model(config)``."""
    model = activation_model(config)
    label = f"{model.name}: {model.formula}"
    rows = [
        LayerComparison(r.rank, layer.layer, layer.measured_bytes, model.total_bytes, label)
        for r in results
        for layer in r.layers
    ]
    return ActivationComparison(tuple(sorted(rows, key=lambda x: (x.rank or 0, x.layer))), model)


@dataclass(frozen=True, slots=True)
class ModelEstimate:
    """`tracekit memory model`: one rank's per-layer model, the layer count, the embedding/output terms (counted
    once) and, when asked for, every saved tensor (the bill of materials)."""

    model: ActivationModel
    layers: int
    extra_terms: tuple[ModelTerm, ...] = ()
    tensors: tuple[SavedTensorSpec, ...] = ()

    @property
    def total_bytes(self) -> int:
        return self.model.total_bytes * self.layers + sum(t.bytes for t in self.extra_terms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.to_dict(),
            "layers": self.layers,
            "embedding_output_terms": [t.to_dict() for t in self.extra_terms],
            "total_bytes": self.total_bytes,
            "tensors": [t.to_dict() for t in self.tensors],
        }


def estimate_memory(config: MemoryConfig, layers: int = 1, vocab: int = 0, tensors: bool = False) -> ModelEstimate:
    """The model of ``config`` for ``layers`` layers, plus the embedding/output terms when ``vocab`` is given."""
    return ModelEstimate(
        activation_model(config),
        layers,
        embedding_output_terms(config, vocab) if vocab else (),
        bill_of_materials(config) if tensors else (),
    )
