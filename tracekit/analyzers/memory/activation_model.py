"""The per-layer activation memory of Korthikanti et al. 2022 (arXiv:2205.05198, section 4 and Table 2).

Pure functions of a :class:`MemoryConfig`. A transformer layer keeps, for backward (e = bytes per activation
element, m = bytes per dropout-mask element; the paper's e = 2, m = 1):

- sequence region (LayerNorm inputs, the QKV and FC1 inputs, two dropout masks): sbh(4e + 2m) = 10 sbh.
  Replicated on every tensor-parallel rank under TP; divided by t under TP + SP.
- tensor-parallel region (Q, K, V, the output-projection input, GELU input, FC2 input): sbh(12e) = 24 sbh,
  divided by t.
- attention scores (softmax output, its dropout mask, the dropout output): as²b(2e + m) = 5 as²b, divided by t.

So no parallelism gives sbh(34 + 5as/h), TP sbh(10 + 24/t + 5as/(ht)), TP + SP sbh/t (34 + 5as/h). Context
parallelism (a ring, or Ulysses) divides the sequence by cp; the score term becomes as²b/cp (a ring keeps
(s/cp)·s scores a head, Ulysses keeps s² scores for a/cp heads). Selective recomputation drops the score
term; full recomputation keeps only the layer input. See docs/activation-memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ...errors import ConfigError
from ...model.dtypes import SHORT_BYTES
from ...model.layout import CpKind, LayoutError, ParallelLayout

RECOMPUTE = ("none", "selective", "full")
CP_KINDS = tuple(k.value for k in CpKind)
ATTENTION = ("standard", "fused")
DTYPE_BYTES = SHORT_BYTES  # --dtype -> bytes per activation element (tracekit.model.dtypes)
_WHERE = "activation model"


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """The shape and parallel layout a layer's activation memory depends on. ``tp``, ``cp``, ``sp`` and
    ``cp_kind`` are validated as a :class:`ParallelLayout` (``layout``), which also checks that the shape shards
    evenly on it; :meth:`from_layout` builds one from a layout."""

    seq: int  # s: the full sequence length
    batch: int  # b: micro-batch size
    hidden: int  # h
    heads: int  # a
    tp: int = 1  # t
    cp: int = 1  # context-parallel size (ring or Ulysses)
    sp: bool = False  # Megatron sequence parallelism (only meaningful with tp > 1)
    cp_kind: CpKind = CpKind.RING  # a plain "ring" / "ulysses" is accepted
    recompute: str = "none"
    attention: str = "standard"  # "fused": a flash-style kernel that saves no s² term
    bytes_per_element: int = 2  # e: 16-bit activations
    mask_bytes: int = 1  # m: a byte a dropout-mask element
    dropout: bool = True
    layernorm_stat_bytes: int = 0  # > 0 adds each LayerNorm's saved mean and rstd (2 s b of them) at this width
    layout: ParallelLayout = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("seq", "batch", "hidden", "heads"):
            _check_positive(name, getattr(self, name))
        try:
            layout = ParallelLayout(tp=self.tp, cp=self.cp, sequence_parallel=self.sp, cp_kind=self.cp_kind)
        except LayoutError as exc:
            raise exc.at(_WHERE) from None
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "cp_kind", layout.cp_kind)
        for name in ("bytes_per_element", "mask_bytes"):
            _check_positive(name, getattr(self, name))
        _check_choice("recompute", self.recompute, RECOMPUTE)
        _check_choice("attention", self.attention, ATTENTION)
        layout.check_shape(seq=self.seq, hidden=self.hidden, heads=self.heads, where=_WHERE)

    @classmethod
    def from_layout(
        cls, layout: ParallelLayout, seq: int, batch: int, hidden: int, heads: int, **options: object
    ) -> MemoryConfig:
        """The model of one rank of ``layout`` (its tp, cp, sequence parallelism and cp kind; dp and the rest do
        not change a rank's activations). ``options``: recompute, attention, bytes_per_element, ..."""
        shape = {"tp": layout.tp, "cp": layout.cp, "sp": layout.sequence_parallel, "cp_kind": layout.cp_kind}
        return cls(seq, batch, hidden, heads, **shape, **options)  # type: ignore[arg-type]

    @property
    def parallelism(self) -> str:
        parts = [] if self.tp == 1 else (["tp+sp"] if self.sp else ["tp"])
        if self.cp > 1:
            parts.append(self.layout.cp_kind.dimension.value)
        if self.recompute != "none":
            parts.append(f"{self.recompute}-recompute")
        return "+".join(parts) or "none"

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        d["cp_kind"] = self.layout.cp_kind.value
        return d


def _check_positive(name: str, value: object) -> None:
    if int(value) < 1:  # type: ignore[call-overload]
        raise ConfigError(f"{_WHERE}: {name}={value} must be >= 1")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{_WHERE}: {name}={value!r} is not one of {', '.join(choices)}")


@dataclass(frozen=True, slots=True)
class ModelTerm:
    """One term of the model: which tensors, where in the layer, and what it is divided by."""

    name: str
    block: str  # "attention" | "mlp" | "layernorm" | "dropout" | "input" | "output"
    bytes: int
    divided_by: str  # "1" (replicated), "t", "cp", "t*cp"

    def to_dict(self) -> dict:
        return {"name": self.name, "block": self.block, "bytes": self.bytes, "divided_by": self.divided_by}


@dataclass(frozen=True, slots=True)
class ActivationModel:
    """The model's answer for one layer on one rank: the paper's total, its terms, and the LayerNorm statistics."""

    config: MemoryConfig
    name: str  # the parallelism: "none", "tp", "tp+sp", "tp+sp+cp", "selective-recompute", ...
    formula: str  # the Table-2-style closed form this evaluates
    terms: tuple[ModelTerm, ...]
    layernorm_stats_bytes: int = 0
    paper_bytes: int = field(init=False)
    total_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        paper = sum(t.bytes for t in self.terms)
        object.__setattr__(self, "paper_bytes", paper)
        object.__setattr__(self, "total_bytes", paper + self.layernorm_stats_bytes)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "formula": self.formula,
            "config": self.config.to_dict(),
            "paper_bytes": self.paper_bytes,
            "layernorm_stats_bytes": self.layernorm_stats_bytes,
            "total_bytes": self.total_bytes,
            "terms": [t.to_dict() for t in self.terms],
        }


def _exact(numerator: int, divisor: int, what: str) -> int:
    if numerator % divisor:
        raise ConfigError(
            f"activation model: {what} = {numerator} bytes does not divide by {divisor}; choose sizes that shard evenly"
        )
    return numerator // divisor


def activation_model(config: MemoryConfig) -> ActivationModel:
    """Bytes of activations one rank keeps for backward for one transformer layer."""
    c = config
    e, m = c.bytes_per_element, c.mask_bytes if c.dropout else 0
    t, cp = c.tp, c.cp
    seq_div = t if c.sp else 1  # the sequence region is sharded by SP
    shards = c.layout.sequence_shards  # cp * seq_div
    sbh = c.seq * c.batch * c.hidden
    ln_stats = _exact(4 * c.seq * c.batch * c.layernorm_stat_bytes, shards, "LayerNorm statistics")
    if c.recompute == "full":
        term = ModelTerm("layer input", "input", _exact(e * sbh, shards, "layer input"), _div(seq_div, cp))
        return ActivationModel(c, c.parallelism, f"sbh({e})" + _suffix(c), (term,), 0)
    region = _div(seq_div, cp)
    terms = [
        ModelTerm("layernorm inputs (2)", "layernorm", _exact(2 * e * sbh, shards, "LN inputs"), region),
        ModelTerm("QKV and FC1 inputs", "input", _exact(2 * e * sbh, shards, "linear inputs"), region),
        ModelTerm("dropout masks (attention, MLP)", "dropout", _exact(2 * m * sbh, shards, "masks"), region),
        ModelTerm("Q, K, V and projection input", "attention", _exact(4 * e * sbh, cp * t, "attention"), _div(t, cp)),
        ModelTerm("GELU and FC2 inputs (4h each)", "mlp", _exact(8 * e * sbh, cp * t, "MLP"), _div(t, cp)),
    ]
    terms.extend(_score_terms(c))
    return ActivationModel(c, c.parallelism, _formula(c), tuple(t for t in terms if t.bytes), ln_stats)


def _score_terms(c: MemoryConfig) -> list[ModelTerm]:
    """The attention-score (s²) terms, or for a fused kernel its fp32 log-sum-exp."""
    if c.recompute == "selective":
        return []
    asb = c.heads * c.seq * c.batch
    if c.attention == "fused":
        return [ModelTerm("softmax log-sum-exp (fp32)", "attention", _exact(4 * asb, c.tp * c.cp, "LSE"), _div(c.tp, c.cp))]
    as2b = asb * c.seq
    e, m = c.bytes_per_element, c.mask_bytes if c.dropout else 0
    # without dropout the V matmul saves the softmax output itself: one tensor, not two
    probs = 2 * e if c.dropout else e
    div = _div(c.tp, c.cp)
    return [
        ModelTerm(
            "softmax output and dropout output" if c.dropout else "softmax output",
            "attention",
            _exact(probs * as2b, c.tp * c.cp, "scores"),
            div,
        ),
        ModelTerm("attention-dropout mask", "dropout", _exact(m * as2b, c.tp * c.cp, "score mask"), div),
    ]


def _div(t: int, cp: int) -> str:
    parts = [name for name, n in (("t", t), ("cp", cp)) if n > 1]
    return "*".join(parts) or "1"


def _suffix(c: MemoryConfig) -> str:
    div = _div(c.tp if c.sp else 1, c.cp)
    return "" if div == "1" else f" / ({div})"


def _formula(c: MemoryConfig) -> str:
    """The closed form in the paper's notation, e.g. ``sbh(10 + 24/t + 5as/(ht))`` (constants from e and m)."""
    e, m = c.bytes_per_element, c.mask_bytes if c.dropout else 0
    rep, tpc = 4 * e + 2 * m, 12 * e
    score = (2 * e + m) if c.dropout else e
    s = "(s/cp)bh" if c.cp > 1 else "sbh"
    ht = "(ht)" if c.tp > 1 else "h"
    if c.recompute == "selective":
        tail = ""
    elif c.attention == "fused":
        tail = f" + 4a/{ht}"
    else:
        tail = f" + {score}as/{ht}"
    if c.tp == 1:
        return f"{s}({rep + tpc}{tail})"
    if c.sp:
        return f"{s}({rep + tpc}/t{tail})"
    return f"{s}({rep} + {tpc}/t{tail})"


def embedding_output_terms(config: MemoryConfig, vocab: int, pipeline: int = 1) -> tuple[ModelTerm, ...]:
    """Section 4.3: the activations outside the layers (first pipeline stage; output terms only without PP).

    Embedding dropout mask sbhp/t, final LayerNorm input 2sbh/t, output-projection input 2sbh/t, fp32 logits
    4sbv/t (the paper assumes SP; without SP the first three are replicated, the logits stay vocab-parallel).
    """
    c = config
    e, m = c.bytes_per_element, c.mask_bytes if c.dropout else 0
    seq_div = c.layout.sequence_shards
    sbh = c.seq * c.batch * c.hidden
    region = _div(c.tp if c.sp else 1, c.cp)
    terms = [
        ModelTerm(
            "embedding dropout mask (p micro-batches)", "dropout", _exact(m * sbh * pipeline, seq_div, "embedding mask"), region
        )
    ]
    if pipeline == 1:
        terms += [
            ModelTerm("final layernorm input", "layernorm", _exact(e * sbh, seq_div, "final LN"), region),
            ModelTerm("output projection input", "output", _exact(e * sbh, seq_div, "output input"), region),
            ModelTerm("logits (fp32)", "output", _exact(4 * c.seq * c.batch * vocab, c.tp * c.cp, "logits"), _div(c.tp, c.cp)),
        ]
    return tuple(t for t in terms if t.bytes)
