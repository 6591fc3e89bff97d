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
from ..formats.rules import rule_entries
from ..model.dtypes import TRACE_BYTES, spelling_key
from .files import read_limited
from .patterns import Matcher, check_pattern, compile_pattern


@dataclass(frozen=True, slots=True)
class CommRule:
    pattern: str
    library: str
    op: str = ""  # fixed op for the rule; "" = infer from the name

    def compiled(self) -> Matcher:
        """RE2 where it can run the pattern (linear time), else Python's re (see ``patterns``)."""
        return compile_pattern(self.pattern)[0]


# Device kernels (and gloo host spans of CPU runs) that carry communication. Name rules are the last
# evidence: collective metadata on the kernel (or its record_param_comms) and the launch context (a kernel or
# memcpy launched from inside a collective host op) come first (see linking.py). Each library's whole kernel
# family, from its public sources: NCCL's ncclKernel_* (before 2.19), ncclDevKernel_* (2.19+) and symmetric-memory
# ncclSymkDevKernel_* (2.27+); RCCL keeps NCCL's names; DeepEP's intranode/internode/internode_ll kernels
# (namespace deep_ep:: or a renamed fork's, e.g. dpsk::ep::) -- but not layout::get_dispatch_layout, which is
# local compute; NVSHMEM's nvshmem*/nvshmemi* device functions and its on-stream collective kernels, whose
# names do not say nvshmem (barrier_on_stream_kernel, fcollect_on_stream_kernel<T>, ...).
DEEPEP_KERNELS = (
    "notify_dispatch",
    "cached_notify_dispatch",
    "cached_notify_combine",
    "cached_notify",
    "notify_combine",
    "dispatch",
    "combine",
    "clean_low_latency_buffer",
    "barrier",
)
DEFAULT_RULES: tuple[CommRule, ...] = (
    CommRule(r"^(void )?ncclKernel_", "nccl"),
    CommRule(r"^(void )?nccl[A-Z][A-Za-z]*Kernel_", "nccl"),  # NCCL <= 2.8: ncclAllReduceRingLLKernel_sum_f32(ncclColl)
    CommRule(r"^(void )?ncclDevKernel", "nccl"),
    CommRule(r"^(void )?ncclSymk?DevKernel_", "nccl"),
    CommRule(r"(?i)^(void )?rccl", "rccl"),
    CommRule(r"(?i)^hccl", "hccl"),
    CommRule(r"^hcom_", "hccl"),  # Ascend HCCL's device tasks: hcom_allReduce__503_0_1, hcom_receive_, ...
    CommRule(r"^kuserbuffers_|userbuffers", "te-userbuffers"),
    CommRule(r"(^|[\s:])(intranode|internode|internode_ll)::(" + "|".join(DEEPEP_KERNELS) + r")\b", "deepep"),
    CommRule(r"(?i)nvshmem", "nvshmem"),
    CommRule(
        r"^(void )?(barrier|barrier_all|sync|sync_all|alltoall|broadcast|fcollect|rdxn|reducescatter)"
        r"_on_stream_kernel",
        "nvshmem",
    ),  # NVSHMEM's on-stream collectives (host/coll, h_to_d_coll_defs.h)
    CommRule(r"^gloo:", "gloo"),
)

# Host ops that issue a collective (not compute, not a comm interval): the launch context of its kernels.
# Each c10d backend names its collectives "<backend>:<op>" (ProcessGroupNCCL's "nccl:all_reduce", XCCL's (Intel
# oneCCL, PyTorch >= 2.7) "xccl:all_reduce", UCC's "ucc:all_reduce", MPI's "mpi:all_reduce", torch_npu's HCCL).
HOST_COMM_OP = re.compile(
    r"^(c10d::|record_param_comms$|nccl:|rccl:|hccl:|xccl:|ucc:|mpi:|gloo:|c10d_functional::|"
    r"_c10d_functional::)"
)

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
        (r"(^|[^a-z])receive", "recv"),  # HCCL's hcom_receive_
        (r"dispatch", "dispatch"),
        (r"combine", "combine"),
    )
)


_NCCL_PREFIX = re.compile(r"^(void )?nccl(Symk?Dev|Dev)?(Kernel)?_?(?=[A-Z])")


def normalize_op(text: str | None) -> str:
    """A collective's op in tracekit's words: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast,
    send, recv, send_recv, reduce, gather, scatter, barrier, dispatch, combine; "" when unknown."""
    if not text:
        return ""
    t = _NCCL_PREFIX.sub("", text.split("(")[0])  # "ncclReduceRingLL...", "ncclKernel_Reduce_RING_LL_Sum_float"
    for pattern, op in _OP_PATTERNS:
        if pattern.search(t):
            return op
    return ""


DTYPE_BYTES = TRACE_BYTES  # a trace's dtype spelling -> bytes per element (tracekit.model.dtypes)


def dtype_bytes(dtype: str | None) -> int:
    """Bytes per element for a trace's dtype spelling ("Float", "BFloat16", "c10::Half", "long int",
    "unsigned char", "torch.bfloat16"); -1 when the spelling is not one of PyTorch's scalar types."""
    if not dtype or not isinstance(dtype, str) or len(dtype) > 64:
        return -1
    return DTYPE_BYTES.get(spelling_key(dtype), -1)


@dataclass(frozen=True, slots=True)
class RuleSet:
    rules: tuple[CommRule, ...] = DEFAULT_RULES
    notes: tuple[str, ...] = ()  # warnings about the user's rules (a pattern RE2 cannot run), for the run's warnings

    def with_patterns(self, patterns: Sequence[str], library: str = "user") -> RuleSet:
        extra, notes = [], []
        for p in patterns:
            note = check_pattern(p, f"--comm-pattern {str(p)[:60]!r}")
            notes += [note] if note else []
            extra.append(CommRule(p, library))
        return RuleSet(tuple(extra) + self.rules, self.notes + tuple(notes))

    def match(self, names: Iterable[str]) -> list[CommRule | None]:
        compiled = [(r, r.compiled()) for r in self.rules]
        out: list[CommRule | None] = []
        for name in names:
            out.append(next((r for r, c in compiled if c.search(name)), None))
        return out


MAX_RULES_FILE_BYTES = 1024**2  # a rule file is a few dozen [[comm]] tables


def load_rules_toml(path: str, base: RuleSet | None = None) -> RuleSet:
    """Extend the rule table from a TOML file of ``[[comm]]`` tables (pattern, library, op: the Struct
    ``formats.rules.RuleEntry``). Anything else (not UTF-8, not TOML, a field of the wrong type, an unknown key) is
    a ConfigError naming the file, the entry and the field."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    data = read_limited(path, MAX_RULES_FILE_BYTES, ConfigError, "comm rule file")
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the comm rule file is not UTF-8 text (byte {exc.start}); TOML files are UTF-8") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); expected [[comm]] tables with a pattern") from None
    rules, notes = [], []
    for i, entry in enumerate(rule_entries(doc, path)):
        note = check_pattern(entry.pattern, f"{path}: [[comm]] entry {i + 1}, field 'pattern'")
        rules.append(CommRule(entry.pattern, entry.library, entry.op))
        notes += [note] if note else []
    base = base or RuleSet()
    return RuleSet(tuple(rules) + base.rules, base.notes + tuple(notes))
