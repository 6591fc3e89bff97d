"""Kernel classes (GEMM, attention, convolution, normalization, elementwise/reduction, ...) as a rule table.

Like the communication rules of ``loader/classify.py``, the rules are data: an ordered table of (pattern, class),
first match wins, applied once to each unique name. The event kind decides first: COMM is ``comm:<library>``
(the library from the loader's communication rules, ``comm:other`` when only collective metadata made it
communication), MEMCPY ``memcpy``, MEMSET ``memset``, SYNC ``sync``; only compute KERNELs go through the table,
and a kernel no rule matches is ``other``. Order matters: attention before GEMM (``fmha_cutlass…``), convolution
before GEMM (``implicit_convolve_sgemm``, cuDNN's implicit-GEMM convolutions), GEMM before reduction
(``splitKreduce_kernel`` belongs to a GEMM), normalization before elementwise (``vectorized_layer_norm_kernel``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...loader.classify import DEFAULT_RULES as COMM_RULES
from ...loader.classify import CommRule
from ...model.events import EventKind


@dataclass(frozen=True, slots=True)
class ClassRule:
    pattern: str
    kernel_class: str


CLASSES = ("gemm", "attention", "convolution", "normalization", "elementwise_reduction", "other")

DEFAULT_CLASS_RULES: tuple[ClassRule, ...] = (
    ClassRule(r"(?i)flash_?(fwd|bwd|attn)|fmha|attention|_attn_|sdpa|xformers|mha_(fwd|bwd)", "attention"),
    ClassRule(r"(?i)conv|winograd|scudnn|dgrad|wgrad|fprop|cask_cudnn|cudnn::cnn::|cudnn::detail::.*engine", "convolution"),
    ClassRule(
        r"(?i)gemm|gemv|cutlass::Kernel|cublas|splitKreduce|epilogue::impl|Cijk_|nvjet|matmul|magma_|"
        r"scal_kernel|dot_kernel|axpy",
        "gemm",
    ),
    ClassRule(
        r"(?i)layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|cudnn::bn_|GammaBeta|"
        r"RowwiseMoments",
        "normalization",
    ),
    ClassRule(
        r"(?i)elementwise|reduce|softmax|multi_tensor_apply|cub::|scan|sort|CatArray|index|gather|scatter|"
        r"copy|fill|dropout|embedding|pool|nchwToNhwc|nhwcToNchw|scalePacked|permute|bounds_check|"
        r"offsets|quantize|FP8|linearize|compute_cuda_kernel|where|arange|cumsum|topk|unique",
        "elementwise_reduction",
    ),
)


@dataclass(frozen=True, slots=True)
class ClassRuleSet:
    rules: tuple[ClassRule, ...] = DEFAULT_CLASS_RULES
    comm_rules: tuple[CommRule, ...] = COMM_RULES

    def with_rules(self, extra: Sequence[ClassRule]) -> ClassRuleSet:
        """User rules first: they win over the shipped ones."""
        for r in extra:
            re.compile(r.pattern)
        return ClassRuleSet(tuple(extra) + self.rules, self.comm_rules)

    def classify(self, names: Iterable[str], kinds: Iterable[int]) -> list[str]:
        """The class of each (unique name, kind) pair. Remembered per rule set for the process's lifetime: the
        ranks of a run share their kernel names, and a rank's own rule search costs more than all its sweeps."""
        pairs = [(name, int(kind)) for name, kind in zip(names, kinds)]
        memo = _MEMO.get(self)
        if memo is None or len(memo) > _MEMO_LIMIT:
            memo = _MEMO[self] = {}
        todo = [p for p in dict.fromkeys(pairs) if p not in memo]
        if todo:
            compiled = [(re.compile(r.pattern), r.kernel_class) for r in self.rules]
            comm = [(re.compile(r.pattern), r.library) for r in self.comm_rules]
            for name, kind in todo:
                memo[(name, kind)] = _class_of(name, kind, compiled, comm)
        return [memo[p] for p in pairs]


_MEMO: dict[ClassRuleSet, dict[tuple[str, int], str]] = {}
_MEMO_LIMIT = 200_000  # distinct (name, kind) pairs remembered per rule set before starting afresh


_FIXED = {int(EventKind.MEMCPY): "memcpy", int(EventKind.MEMSET): "memset", int(EventKind.SYNC): "sync"}


def _class_of(name: str, kind: int, compiled, comm) -> str:
    if kind in _FIXED:
        return _FIXED[kind]
    if kind == int(EventKind.COMM):
        return "comm:" + next((lib for p, lib in comm if p.search(name)), "other")
    return next((c for p, c in compiled if p.search(name)), "other")


def category(kernel_class: str) -> str:
    """The three kinds of device work HTA's temporal partition uses: compute, communication, memory."""
    if kernel_class.startswith("comm:"):
        return "communication"
    if kernel_class in ("memcpy", "memset"):
        return "memory"
    if kernel_class == "sync":
        return "sync"
    return "compute"
