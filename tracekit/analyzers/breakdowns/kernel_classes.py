"""Kernel classes (GEMM, attention, convolution, embedding, normalization, MoE routing, copy, elementwise,
reduction, other) as a rule table over the tokens of the demangled name.

Like the communication rules of ``loader/classify.py`` the rules are data: an ordered table of (pattern, class),
first match wins, run as one RE2 set (``loader.patterns.FirstMatch``: linear time, one pass, a name's first
16 KiB) once per distinct (name, kind). Every pattern is anchored on a token boundary -- a non-letter, or the
lower-to-upper case step of a camel-case identifier -- never a bare substring: ``conv`` must be followed by
``olution``/``olve``/``Nd`` or a non-letter, so ``_typeConvert`` (vLLM's RMS norm) is not a convolution; ``gemm``
must not follow ``fb``, so FBGEMM's embedding kernels are not GEMMs. The kind decides first: COMM is
``comm:<library>`` (the loader's rules; ``comm:other`` when only collective metadata or the launch context made
it communication), MEMCPY ``memcpy``, MEMSET ``memset``, SYNC ``sync``; only compute KERNELs go through the table.

Order: attention first (cuDNN's SDPA kernels say ``fprop``, FlashAttention's ``gemm``); MoE routing before
normalization and GEMM (``topkGatingSoftmax``); normalization before Triton's generic prefixes (a
``triton_red_fused_native_layer_norm`` is a layer norm); then Triton's own kinds (``triton_tem`` a matmul
template, ``triton_poi`` pointwise, ``triton_red``/``triton_per`` reductions); embedding before convolution and
GEMM; convolution before GEMM (cuDNN's implicit-GEMM convolutions); GEMM before reduction (``splitKreduce``
finishes a GEMM); reduction (scatter-add, index-add) before copy (gather, scatter, index); copy before
elementwise (an elementwise kernel running ``direct_copy_kernel`` is a copy). docs/breakdowns.md defines each.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...loader.classify import DEFAULT_RULES as COMM_RULES
from ...loader.classify import CommRule
from ...loader.patterns import MAX_MATCH_CHARS, FirstMatch, check_pattern
from ...model.events import EventKind


@dataclass(frozen=True, slots=True)
class ClassRule:
    pattern: str
    kernel_class: str


CLASSES = (
    "gemm",
    "attention",
    "convolution",
    "embedding",
    "normalization",
    "moe",
    "copy",
    "elementwise",
    "reduction",
    "other",
)

# (class, RE2 pattern) in order. A token boundary is spelled out in each pattern: (^|[^a-z]) in a (?i) pattern (a
# non-letter), (^|[^A-Za-z]) or a lower-case letter before an upper-case one in a case-sensitive pattern.
DEFAULT_CLASS_RULES: tuple[ClassRule, ...] = tuple(
    ClassRule(p, c)
    for c, p in (
        ("attention", r"(?i)flash_?(attn|fwd|bwd|mla|decoding)|(^|[^a-z])flash::|fmha|(^|[^a-z])mha_(fwd|bwd)|sdpa"),
        ("attention", r"(?i)attention|(^|[^a-z])_?attn_(fwd|bwd)|_attn_|xformers|(^|[^a-z])sage_?(attn|fwd|bwd)"),
        ("attention", r"(^|[\s:])__?(fwd|bwd)_kernel([^a-z]|$)|(Prefill|Decode)With\w*KVCache"),
        ("moe", r"(?i)(^|[^a-z])moe_?(align|permute|unpermute|sum|sort|router|routing|gat(e|ing)|topk)|topk_?gating"),
        ("moe", r"(?i)expandInputRows|finalizeMoeRouting|count_and_sort_expert|grouped_topk|(^|[^a-z])expert_?(offsets|map)"),
        ("normalization", r"(?i)(layer|rms|batch|group|instance)_?norm|GammaBeta|RowwiseMoments|(^|[^a-z])bn_(fw|bw)"),
        ("gemm", r"^triton_tem_"),
        ("elementwise", r"^triton_poi_|(?i)(^|[^a-z])(rotary|rope)([^a-z]|$)|rotary_?emb"),
        ("reduction", r"^triton_(red|per)_"),
        ("embedding", r"(?i)embedding|(^|[^a-z])split_eb_|pooled_embs|(^|[^a-z])bounds_check_indices|linearize_index"),
        ("convolution", r"(^|[^A-Za-z])[Cc]onv(olution|olve|[123]d)?([^a-z]|$)|[a-z]Conv(olution|olve|[123]d)?([^a-z]|$)"),
        ("convolution", r"(?i)winograd|scudnn|(^|[^a-z])(dgrad|wgrad|fprop)([^a-z]|$)|cudnn::cnn::|cask_cudnn|convolve"),
        (
            "convolution",
            r"cudnn::detail::\w*(dgrad|wgrad)|(^|[^a-z])wgrad_alg|cutlass_cudnn|_cudnn_(infer|train)|fft2d_(r2c|c2r)",
        ),
        ("gemm", r"(?i)(^|[^b])gemm|(^|[^f])bgemm|gemv|cublas|splitKreduce|epilogue::impl|(^|[^a-z])Cijk_|nvjet"),
        ("gemm", r"(?i)matmul|(^|[^a-z])(add|b|addb|baddb|scaled_|grouped_)?mm([^a-z]|$)|(^|[^a-z])bmm_|cutlass|magma_"),
        ("gemm", r"(?i)(^|[^a-z])(scal|dot|axpy)_kernel|^fc(-|$)|f8f8bf16|fp8_gemm|deep_gemm|wmma"),
        ("reduction", r"(?i)(^|[^a-z])reduce_(kernel|sum)|ReduceOp|Reduce(Add|Multiply|Mean|Maximum|Minimum)"),
        ("reduction", r"(?i)(^|[^a-z])(scatter|index)_add|softmax|(^|[^a-z])cum(sum|prod)|(^|[^a-z])(arg)?topk"),
        ("reduction", r"(?i)(^|[^a-z])(max|min|sum|mean|prod|argmax|argmin)(_dim|\.out|-dtype)|vector_norm|NormTwoOps"),
        ("reduction", r"(?i)cub::Device|(^|[^a-z])(avg_|max_|adaptive_\w*)?pool(ing)?([^a-z]|$)"),
        ("elementwise", r"elementwise_kernel_with_index|(?i)(^|[^a-z])arange"),
        ("copy", r"(?i)(^|[^a-z])(direct_)?copy([^a-z]|$)|CatArray|nchwToNhwc|nhwcToNchw|(^|[^a-z])cat\.out|_to_copy"),
        ("copy", r"(^|[^A-Za-z])(index_?select|indexSelect|gather|scatter|index|index_put|transpose)([^a-z]|$)"),
        ("copy", r"permute_(2[Dd]|indices)|reshape_and_cache|(^|[^a-z])cache_kernel"),
        ("elementwise", r"(?i)elementwise|multi_tensor_apply|dropout|Functor|(^|[^a-z])(fill|masked_fill)([^a-z]|$)"),
        ("elementwise", r"(?i)quantize|fp8|float_to|to_float|scalePacked|(^|[^a-z])(bucketize|offsets_range)"),
        (
            "elementwise",
            r"(?i)(^|[^a-z])(relu|gelu|silu|sigmoid|tanh|exp|log2?|sqrt|rsqrt|neg|abs|clamp|clip|where|add|sub|mul|div"
            r"|divide|reciprocal|pow|nan_to_num|eq|ne|gt|ge|lt|le|logical_and|logical_or|threshold)(_backward|_kernel)?([^a-z]|$)",
        ),
        ("elementwise", r"compute_cuda_kernel|sparse_label_to|to_dense|bce_with_logits|fba_mul"),
    )
)


@dataclass(frozen=True, slots=True)
class ClassRuleSet:
    rules: tuple[ClassRule, ...] = DEFAULT_CLASS_RULES
    comm_rules: tuple[CommRule, ...] = COMM_RULES

    def with_rules(self, extra: Sequence[ClassRule]) -> ClassRuleSet:
        """User rules first: they win over the shipped ones (RE2, as user comm rules; see loader/patterns.py)."""
        for r in extra:
            check_pattern(r.pattern, f"kernel-class rule {r.pattern[:60]!r}")
        return ClassRuleSet(tuple(extra) + self.rules, self.comm_rules)

    def classify(self, names: Iterable[str], kinds: Iterable[int]) -> list[str]:
        """The class of each (unique name, kind) pair, each distinct pair (its first MAX_MATCH_CHARS characters)
        worked out once per rule set for the process's lifetime: the ranks of a run share their kernel names, and a
        rank analysed in a worker brings its own unpickled copy of the rule set, equal to the others."""
        memo = _MEMO.setdefault(self, {})
        out = []
        for name, kind in zip(names, kinds):
            key = (name[:MAX_MATCH_CHARS], int(kind))
            c = memo.get(key)
            if c is None:
                c = _class_of(key[0], key[1], self.rules, self.comm_rules)
                if len(memo) < _MEMO_LIMIT:
                    memo[key] = c
            out.append(c)
        return out


_MEMO: dict[ClassRuleSet, dict[tuple[str, int], str]] = {}  # rule set -> (name head, kind) -> class
_MEMO_LIMIT = 1 << 16  # distinct pairs remembered per rule set; beyond, each is worked out again


_FIXED = {int(EventKind.MEMCPY): "memcpy", int(EventKind.MEMSET): "memset", int(EventKind.SYNC): "sync"}


def _class_of(name: str, kind: int, rules: tuple[ClassRule, ...], comm_rules: tuple[CommRule, ...]) -> str:
    if kind in _FIXED:
        return _FIXED[kind]
    if kind == int(EventKind.COMM):
        i = _matcher(tuple(r.pattern for r in comm_rules))(name)
        return "comm:" + (comm_rules[i].library if i >= 0 else "other")
    i = _matcher(tuple(r.pattern for r in rules))(name)
    return rules[i].kernel_class if i >= 0 else "other"


@functools.lru_cache(maxsize=32)
def _matcher(patterns: tuple[str, ...]) -> FirstMatch:
    return FirstMatch(patterns)


def category(kernel_class: str) -> str:
    """The three kinds of device work HTA's temporal partition uses: compute, communication, memory."""
    if kernel_class.startswith("comm:"):
        return "communication"
    if kernel_class in ("memcpy", "memset"):
        return "memory"
    if kernel_class == "sync":
        return "sync"
    return "compute"
