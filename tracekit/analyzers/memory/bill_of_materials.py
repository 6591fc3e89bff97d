"""A bill of materials: every tensor the standard transformer layer saves for backward, with its shape on one rank.

Written independently of the closed forms in :mod:`memory_model`: the model adds coefficients, this lists
tensors (as the autograd ops of the layer save them) and multiplies out their shapes. The two must agree;
the tests hold them to it, and hold the measured layer to this list tensor by tensor.

The layer (Megatron's, as in the paper): LN1 -> QKV (column-parallel) -> QK^T -> softmax -> dropout -> x V ->
projection (row-parallel) -> dropout -> residual -> LN2 -> FC1 4h (column) -> GELU -> FC2 (row) -> dropout
-> residual.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ...model.layout import CpKind
from .activation_model import MemoryConfig


@dataclass(frozen=True, slots=True)
class SavedTensorSpec:
    """One tensor saved for backward: which op saves it, its shape on this rank, and its bytes."""

    name: str
    op: str
    block: str  # "attention" | "mlp" | "layernorm" | "dropout" | "input"
    shape: tuple[int, ...]
    element_bytes: int
    paper: bool = True  # False: saved by torch but not in the paper's count (LayerNorm statistics)

    @property
    def bytes(self) -> int:
        return prod(self.shape) * self.element_bytes

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "op": self.op,
            "block": self.block,
            "shape": list(self.shape),
            "element_bytes": self.element_bytes,
            "bytes": self.bytes,
            "paper": self.paper,
        }


def bill_of_materials(c: MemoryConfig) -> tuple[SavedTensorSpec, ...]:
    """The saved tensors of one layer on one rank (LayerNorm statistics included when the config asks)."""
    s_local = c.seq // c.cp  # ring and Ulysses: each rank owns s/cp tokens outside attention
    s_seq = s_local // (c.tp if c.sp else 1)  # the sequence region: sharded again by SP
    b, h, e = c.batch, c.hidden, c.bytes_per_element
    T = SavedTensorSpec
    if c.recompute == "full":
        return (T("layer input", "checkpoint", "input", (s_seq, b, h), e),)
    out = [
        T("LN1 input", "native_layer_norm", "layernorm", (s_seq, b, h), e),
        T("QKV input (LN1 output)", "linear", "input", (s_seq, b, h), e),
    ]
    out += _attention(c, s_local)
    out += [T("projection input (context)", "linear", "attention", (s_local, b, h // c.tp), e)]
    if c.dropout:
        out.append(T("attention-output dropout mask", "native_dropout", "dropout", (s_seq, b, h), c.mask_bytes))
    out += [
        T("LN2 input", "native_layer_norm", "layernorm", (s_seq, b, h), e),
        T("FC1 input (LN2 output)", "linear", "input", (s_seq, b, h), e),
        T("GELU input", "gelu", "mlp", (s_local, b, 4 * h // c.tp), e),
        T("FC2 input (GELU output)", "linear", "mlp", (s_local, b, 4 * h // c.tp), e),
    ]
    if c.dropout:
        out.append(T("MLP dropout mask", "native_dropout", "dropout", (s_seq, b, h), c.mask_bytes))
    if c.layernorm_stat_bytes:
        stat = (s_seq, b, 1)
        out += [
            T(f"LN{i} {what}", "native_layer_norm", "layernorm", stat, c.layernorm_stat_bytes, paper=False)
            for i in (1, 2)
            for what in ("mean", "rstd")
        ]
    return tuple(out)


def _attention(c: MemoryConfig, s_local: int) -> list[SavedTensorSpec]:
    """Q, K, V and the score tensors. Ring: local queries against all s keys; Ulysses: all s, a/(t cp) heads."""
    b, e, d = c.batch, c.bytes_per_element, c.hidden // c.heads
    T = SavedTensorSpec
    if c.cp_kind is CpKind.ULYSSES and c.cp > 1:  # after the all-to-all: every token, a/(t cp) heads
        heads, sq, skv = c.heads // (c.tp * c.cp), c.seq, c.seq
    else:  # a ring keeps its own K/V block; the others circulate again in backward
        heads, sq, skv = c.heads // c.tp, s_local, s_local
    sk = c.seq  # scores: local queries against every key (the ring's cp blocks of (s/cp)^2 together)
    out = [
        T("Q", "bmm (QK^T)", "attention", (b, heads, sq, d), e),
        T("K", "bmm (QK^T)", "attention", (b, heads, skv, d), e),
        T("V", "bmm (x V)", "attention", (b, heads, skv, d), e),
    ]
    if c.recompute == "selective":
        return out
    if c.attention == "fused":
        return out + [T("softmax log-sum-exp", "flash attention", "attention", (b, heads, sq), 4)]
    scores = (b, heads, sq, sk)
    out.append(T("softmax output", "softmax", "attention", scores, e))
    if c.dropout:
        out += [
            T("attention-probs dropout mask", "native_dropout", "dropout", scores, c.mask_bytes),
            T("dropout output (x V input)", "bmm (x V)", "attention", scores, e),
        ]
    return out
