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

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..formats.rules import rule_entries
from ..model.dtypes import TRACE_BYTES, spelling_key
from .comm_families import FAMILIES
from .files import read_limited
from .patterns import FirstMatch, Matcher, check_pattern, compile_pattern


@dataclass(frozen=True, slots=True)
class CommRule:
    pattern: str
    library: str
    op: str = ""  # fixed op for the rule; "" = infer from the name

    def compiled(self) -> Matcher:
        """RE2 where it can run the pattern (linear time), else Python's re (see ``patterns``)."""
        return compile_pattern(self.pattern)[0]


# Device kernels (and gloo host spans of CPU runs) that carry communication, one row per family of names read
# from each library's sources (comm_families.py). Name rules are the last evidence: collective metadata on the
# kernel (or its record_param_comms) and the launch context come first (see linking.py).
DEFAULT_RULES: tuple[CommRule, ...] = tuple(CommRule(pattern, library, op) for library, pattern, op, _ in FAMILIES)

# Host ops that issue a collective (not compute, not a comm interval): the launch context of its kernels.
# Each c10d backend names its collectives "<backend>:<op>" (ProcessGroupNCCL's "nccl:all_reduce", XCCL's (Intel
# oneCCL, PyTorch >= 2.7) "xccl:all_reduce", UCC's "ucc:all_reduce", MPI's "mpi:all_reduce", torch_npu's HCCL).
# PyTorch's symmetric-memory ops (symm_mem::one_shot_all_reduce, ::two_shot_all_reduce_, ::multimem_all_reduce_,
# ::reduce_scatter_out, ::all_to_all_vdev, ...; not the fused_all_gather_matmul / fused_matmul_reduce_scatter /
# _async_input_mm ops, whose GEMMs are compute) and vLLM's custom all-reduce ops (_C_custom_ar::all_reduce,
# ::qr_all_reduce) issue their library's communication kernels.
HOST_COMM_OP = re.compile(
    r"^(c10d::|record_param_comms$|nccl:|rccl:|hccl:|xccl:|ucc:|mpi:|gloo:|c10d_functional::|"
    r"_c10d_functional::|_C_custom_ar::|"
    r"symm_mem::(one_shot_all_reduce|two_shot_all_reduce|multimem_|reduce_scatter|all_to_all|all_gather|"
    r"nvshmem_|broadcast|barrier|put_signal|wait_signal))"
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
        (r"notify", "notify"),  # DeepEP's notify_dispatch, cached_notify_combine: before dispatch and combine
        (r"dispatch", "dispatch"),
        (r"combine", "combine"),
    )
)


_NCCL_PREFIX = re.compile(r"^(void )?nccl(Symk?Dev|Dev)?(Kernel)?_?(?=[A-Z])")


def normalize_op(text: str | None) -> str:
    """A collective's op in tracekit's words: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast,
    send, recv, send_recv, reduce, gather, scatter, barrier, dispatch, combine, notify; "" when unknown."""
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
        """The first rule each name matches (None for none), all rules in one RE2 pass per name."""
        first = _first_match(self.rules)
        return [self.rules[i] if i >= 0 else None for i in map(first, names)]

    def ops(self, names: Iterable[str]) -> list[str]:
        """The op each name's rule fixes, else the op its name says (``normalize_op``), else ""."""
        names = list(names)
        return [(r.op if r is not None else "") or normalize_op(n) for r, n in zip(self.match(names), names)]


@functools.lru_cache(maxsize=32)
def _first_match(rules: tuple[CommRule, ...]) -> FirstMatch:
    return FirstMatch(tuple(r.pattern for r in rules))


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
