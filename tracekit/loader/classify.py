"""Communication classification rules (data, not `if` chains), op normalisation and dtype sizes.

Rules apply to the few hundred *unique* names of a trace, never to every row. Collective metadata on the
event (``Collective name``) wins over any name rule. Users extend the table with ``--comm-pattern REGEX`` or a
TOML file::

    [[comm]]
    pattern = "^my_allgather_kernel"
    library = "custom"
    op = "all_gather"        # optional
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True, slots=True)
class CommRule:
    pattern: str
    library: str
    op: str = ""  # fixed op for the rule; "" = infer from the name

    def compiled(self) -> re.Pattern:
        return re.compile(self.pattern)


# Device kernels (and gloo host spans of CPU runs) that carry communication. Name rules are the last
# evidence: collective metadata on the kernel (or its record_param_comms) and the launch context (a kernel or
# memcpy launched from inside a collective host op) come first (see linking.py). Each library's whole kernel
# family, from its public sources: NCCL's ncclKernel_* (before 2.19), ncclDevKernel_* (2.19+) and symmetric-memory
# ncclSymkDevKernel_* (2.27+); RCCL keeps NCCL's names; DeepEP's intranode/internode/internode_ll kernels
# (namespace deep_ep:: or a renamed fork's, e.g. dpsk::ep::) -- but not layout::get_dispatch_layout, which is
# local compute; NVSHMEM's nvshmem*/nvshmemi* device functions and its on-stream collective kernels, whose
# names do not say nvshmem (barrier_on_stream_kernel, fcollect_on_stream_kernel<T>, ...).
DEEPEP_KERNELS = ("notify_dispatch", "cached_notify_dispatch", "cached_notify_combine", "cached_notify",
                  "notify_combine", "dispatch", "combine", "clean_low_latency_buffer", "barrier")
DEFAULT_RULES: tuple[CommRule, ...] = (
    CommRule(r"^(void )?ncclKernel_", "nccl"),
    CommRule(r"^(void )?ncclDevKernel", "nccl"),
    CommRule(r"^(void )?ncclSymk?DevKernel_", "nccl"),
    CommRule(r"(?i)^(void )?rccl", "rccl"),
    CommRule(r"(?i)^hccl", "hccl"),
    CommRule(r"^kuserbuffers_|userbuffers", "te-userbuffers"),
    CommRule(r"(^|[\s:])(intranode|internode|internode_ll)::(" + "|".join(DEEPEP_KERNELS) + r")\b", "deepep"),
    CommRule(r"(?i)nvshmem", "nvshmem"),
    CommRule(r"^(void )?(barrier|barrier_all|sync|sync_all|alltoall|broadcast|fcollect|rdxn|reducescatter)"
             r"_on_stream_kernel", "nvshmem"),  # NVSHMEM's on-stream collectives (host/coll, h_to_d_coll_defs.h)
    CommRule(r"^gloo:", "gloo"),
)

# Host ops that issue a collective (not compute, not a comm interval): the launch context of its kernels.
HOST_COMM_OP = re.compile(r"^(c10d::|record_param_comms$|nccl:|rccl:|hccl:|gloo:|c10d_functional::|"
                          r"_c10d_functional::)")

_OP_PATTERNS: tuple[tuple[re.Pattern, str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), op)
    for p, op in (
        (r"reduce_?scatter", "reduce_scatter"),
        (r"all_?gather", "all_gather"),
        (r"all_?reduce", "all_reduce"),
        (r"all_?to_?all", "all_to_all"),
        (r"fcollect", "all_gather"),  # NVSHMEM's names
        (r"^rdxn", "all_reduce"),
        (r"send_?recv", "send_recv"),
        (r"broadcast", "broadcast"),
        (r"barrier", "barrier"),
        (r"(^|[^a-z])gather", "gather"),
        (r"(^|[^a-z])scatter", "scatter"),
        (r"(^|[^a-z_])reduce", "reduce"),
        (r"(^|[^a-z])send", "send"),
        (r"(^|[^a-z])recv", "recv"),
        (r"dispatch", "dispatch"),
        (r"combine", "combine"),
    )
)


def normalize_op(text: str | None) -> str:
    """A collective's op in tracekit's words: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast,
    send, recv, send_recv, reduce, gather, scatter, barrier, dispatch, combine; "" when unknown."""
    if not text:
        return ""
    t = text.split("(")[0]
    for pattern, op in _OP_PATTERNS:
        if pattern.search(t):
            return op
    return ""


DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "char": 1, "int8": 1,
    "byte": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "complexfloat": 8,
    "complexdouble": 16,
}


def dtype_bytes(dtype: str | None) -> int:
    """Bytes per element for a trace's dtype string ("Float", "BFloat16", "c10::Half", "torch.bfloat16")."""
    if not dtype:
        return -1
    key = dtype.lower().replace("c10::", "").replace("torch.", "").replace("at::", "")
    return DTYPE_BYTES.get(key, -1)


@dataclass(frozen=True, slots=True)
class RuleSet:
    rules: tuple[CommRule, ...] = DEFAULT_RULES

    def with_patterns(self, patterns: Sequence[str], library: str = "user") -> RuleSet:
        extra = []
        for p in patterns:
            try:
                re.compile(p)
            except re.error as exc:
                raise ConfigError(f"--comm-pattern {p!r}: not a valid regular expression ({exc})") from None
            extra.append(CommRule(p, library))
        return RuleSet(tuple(extra) + self.rules)

    def match(self, names: Iterable[str]) -> list[CommRule | None]:
        compiled = [(r, r.compiled()) for r in self.rules]
        out: list[CommRule | None] = []
        for name in names:
            out.append(next((r for r, c in compiled if c.search(name)), None))
        return out


def load_rules_toml(path: str, base: RuleSet | None = None) -> RuleSet:
    """Extend the rule table from a TOML file of ``[[comm]]`` tables (pattern, library, op)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read comm rules ({exc}); expected [[comm]] tables with a pattern") from None
    rules = []
    for i, entry in enumerate(doc.get("comm", [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("pattern"), str):
            raise ConfigError(f"{path}: [[comm]] entry {i + 1} needs a string 'pattern'")
        try:
            re.compile(entry["pattern"])
        except re.error as exc:
            raise ConfigError(f"{path}: [[comm]] entry {i + 1}: bad pattern ({exc})") from None
        rules.append(CommRule(entry["pattern"], str(entry.get("library", "user")), str(entry.get("op", ""))))
    base = base or RuleSet()
    return RuleSet(tuple(rules) + base.rules)
