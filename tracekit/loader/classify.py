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

from ..dtypes import TRACE_BYTES
from ..errors import ConfigError


@dataclass(frozen=True, slots=True)
class CommRule:
    pattern: str
    library: str
    op: str = ""  # fixed op for the rule; "" = infer from the name

    def compiled(self) -> re.Pattern:
        return re.compile(self.pattern)


# Device kernels (and gloo host spans) that carry communication.
DEFAULT_RULES: tuple[CommRule, ...] = (
    CommRule(r"^ncclKernel_", "nccl"),
    CommRule(r"^ncclDevKernel_", "nccl"),
    CommRule(r"^ncclSymkDevKernel_", "nccl"),
    CommRule(r"(?i)^(void )?rccl", "rccl"),
    CommRule(r"(?i)^hccl", "hccl"),
    CommRule(r"^kuserbuffers_|userbuffers", "te-userbuffers"),
    CommRule(r"(?i)deep_ep::|intranode::(dispatch|combine|notify)|internode::(dispatch|combine|notify)"
             r"|internode_ll::(dispatch|combine)", "deepep"),
    CommRule(r"(?i)nvshmem", "nvshmem"),
    CommRule(r"^gloo:", "gloo"),
)

# Host ops that issue a collective (not compute, not a comm interval).
HOST_COMM_OP = re.compile(r"^(c10d::|record_param_comms$|nccl:|gloo:|c10d_functional::|_c10d_functional::)")

_OP_PATTERNS: tuple[tuple[re.Pattern, str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), op)
    for p, op in (
        (r"reduce_?scatter", "reduce_scatter"),
        (r"all_?gather", "all_gather"),
        (r"all_?reduce", "all_reduce"),
        (r"all_?to_?all", "all_to_all"),
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


DTYPE_BYTES = TRACE_BYTES  # a trace's dtype spelling -> bytes per element (tracekit.dtypes)


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
