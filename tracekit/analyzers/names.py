"""Short kernel names: a C++ signature reduced to what tells kernels apart -- its function's qualified name and
first template arguments -- and, for a set of kernels, labels that never give two different kernels one name.

    void dpsk::ep::internode::cached_notify<false>(int, int, ...)      -> dpsk::ep::internode::cached_notify<false>
    void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(int, ...)
                                                                        -> at::native::vectorized_elementwise_kernel<4, …>
    std::enable_if<(8>(0))&&(...), void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)
                                                                        -> vllm::fused_add_rms_norm_kernel<c10::BFloat16, …>
    void cutlass::device_kernel<flash::FlashAttnBwdSm90<...>>(...)      -> flash::FlashAttnBwdSm90<…>

The return type (the tokens before the function name, ``std::enable_if<…>::type`` included) and the parameter list
go; of each template argument list only the first argument stays (itself shortened the same way), the rest
become ``…``. A launch wrapper (``cutlass::device_kernel<X>``, ``cutlass::Kernel<X>``, ``Kernel2``, the
``enable_sm90_or_later<X>`` guards) is not the kernel: X is, so X's own name is shortened. Inside parentheses
``<`` and ``>`` are comparisons, not brackets (demanglers print ``(8>(0))`` for a template condition). A first
argument that is a function-local type (a lambda inside ``f(...)``) keeps the enclosing function's name:
``f(…)``. ``(anonymous namespace)`` is part of a qualified name. Names that are not C++ signatures
(``volta_sgemm_128x32_nt``, ``Memcpy HtoD (Pageable -> Device)``, Tensile's ``Cijk_…``) come back unchanged.
A name is read on its first ``MAX_PARSE_CHARS`` characters. Never raises: unbalanced brackets give the name up
to its parameter list.

``distinct_short_names`` labels a set of different kernels: their short names, and where two would coincide,
more of what differs (every template argument, then the whole template, then the whole name), then a ``#k``
suffix; at a print width the terminal keeps them apart the same way (reports/terminal.py).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Sequence

ELLIPSIS = "…"
MAX_PARSE_CHARS = 8192  # a name is shortened from its head: real demangled kernel names are shorter
_ANON = "(anonymous namespace)"
_ANON_MARK = "\x00"  # stands for "(anonymous namespace)" while parsing
_OPEN = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_VERBATIM = ("Memcpy", "Memset", "dma", "Event ", "Stream ", "Context ")  # copies, sets and syncs: kept as they are
# launch wrappers whose first template argument is the kernel itself
_WRAPPER = re.compile(r"(^|::)(device_kernel|Kernel2?|enable_sm\d+_or_later|enable_sm\d+_to_sm\d+)$")
ALL = 1 << 30  # keep every template argument


@functools.lru_cache(maxsize=65536)
def short_name(name: str, keep: int = 1) -> str:
    """The qualified name and first ``keep`` template arguments of a kernel signature (the module docstring)."""
    if not name or name.startswith(_VERBATIM) or ("<" not in name and "(" not in name):
        return name
    text = name[:MAX_PARSE_CHARS].replace(_ANON, _ANON_MARK).replace("->", "")
    try:
        out = _function_name(text, keep)
    except ValueError:
        out = text.split("(", 1)[0].strip() or text
    return out.replace(_ANON_MARK, _ANON) or name


def _function_name(text: str, keep: int) -> str:
    """Cut the parameter list, drop the return type, unwrap a launch wrapper, shorten the template arguments."""
    cut = _top_level_index(text, "(")
    head = (text if cut is None else text[:cut]).rstrip()
    tokens = _top_level_split(head, " ")
    qualified = tokens[-1] if tokens else head
    return _shorten_templates(_unwrapped(qualified), keep)


def _unwrapped(qualified: str) -> str:
    """``cutlass::device_kernel<X>`` -> X (again while X is itself a wrapper)."""
    for _ in range(4):
        lt = _top_level_index(qualified, "<")
        if lt is None or not _WRAPPER.search(qualified[:lt]) or not qualified.endswith(">"):
            return qualified
        args = _top_level_split(qualified[lt + 1 : -1], ",")
        if not args:
            return qualified
        qualified = args[0]
    return qualified


def _scan(text: str):
    """(index, char, depth before it) for every character, brackets tracked; inside parentheses ``<``/``>`` are
    comparison operators. Raises ValueError on unbalanced brackets."""
    stack: list[str] = []
    for i, c in enumerate(text):
        in_parens = "(" in stack
        if c in _OPEN and not (in_parens and c == "<"):
            yield i, c, len(stack)
            stack.append(c)
        elif c in _CLOSE and not (in_parens and c == ">"):
            if not stack or stack[-1] != _CLOSE[c]:
                raise ValueError(text)
            stack.pop()
            yield i, c, len(stack)
        else:
            yield i, c, len(stack)
    if stack:
        raise ValueError(text)


def _top_level_index(text: str, char: str) -> int | None:
    """Index of the first ``char`` outside every bracket; raises ValueError on unbalanced brackets."""
    for i, c, depth in _scan(text):
        if depth == 0 and c == char:
            return i
    return None


def _top_level_split(text: str, sep: str) -> list[str]:
    parts, start = [], 0
    for i, c, depth in _scan(text):
        if c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _shorten_templates(qualified: str, keep: int = 1) -> str:
    """Each ``<...>`` at the top level keeps its first ``keep`` arguments (shortened) and ``…`` for the others."""
    out: list[str] = []
    i = 0
    while i < len(qualified):
        c = qualified[i]
        if c != "<":
            if c == "(":  # a parameter list inside a qualified name: f(args)::{lambda()#1} -> f(…)
                return "".join(out) + f"({ELLIPSIS})"
            out.append(c)
            i += 1
            continue
        close = _matching(qualified, i)
        args = _top_level_split(qualified[i + 1 : close], ",")
        kept = [_shorten_argument(a) for a in args[:keep]]
        out.append("<" + ", ".join(kept) + (f", {ELLIPSIS}" if len(args) > keep else "") + ">")
        i = close + 1
    return "".join(out)


def _shorten_argument(arg: str) -> str:
    if arg.startswith("(") and _top_level_index(arg, " ") is None:  # a cast such as (cudnnKernelDataType_t)2
        return arg
    return _shorten_templates(arg)


def _matching(text: str, start: int) -> int:
    for i, c, depth in _scan_from(text, start):
        if depth == 0 and c == _OPEN[text[start]]:
            return i
    raise ValueError(text)


def _scan_from(text: str, start: int):
    """``_scan`` of ``text[start:]`` (indices into ``text``); a dangling tail is not an error here."""
    try:
        for i, c, depth in _scan(text[start:]):
            yield start + i, c, depth
    except ValueError:
        raise ValueError(text) from None


@functools.lru_cache(maxsize=16384)  # every rank of a run has the same kernels: parsed once per process
def _levels(name: str) -> tuple[str, ...]:
    """More and more of a name: its short name, every template argument, its whole function (template
    arguments verbatim, no return type, no parameters), the name itself."""
    head = name[:MAX_PARSE_CHARS]
    return (short_name(name), short_name(name, ALL), _whole_function(head), head)


def _whole_function(text: str) -> str:
    marked = text.replace(_ANON, _ANON_MARK).replace("->", "")
    try:
        cut = _top_level_index(marked, "(")
        head = (marked if cut is None else marked[:cut]).rstrip()
        tokens = _top_level_split(head, " ")
        out = tokens[-1] if tokens else head
    except ValueError:
        out = marked.split("(", 1)[0].strip() or marked
    return out.replace(_ANON_MARK, _ANON)


def distinct_short_names(names: Sequence[str]) -> list[str]:
    """A label per name, the short name wherever it is unique among ``names``; where two different names would
    share one, each shows more of itself (``_levels``) until they differ, then ``#k`` (k in name order).
    Equal names get equal labels."""
    distinct = sorted(set(names))
    level = dict.fromkeys(distinct, 0)
    levels = {n: _levels(n) for n in distinct}
    for _ in range(len(levels[distinct[0]]) if distinct else 0):
        groups = _collisions({n: levels[n][level[n]] for n in distinct})
        if not groups:
            break
        for group in groups:
            for n in group:
                level[n] = min(level[n] + 1, len(levels[n]) - 1)
    label = {n: levels[n][level[n]] for n in distinct}
    for group in _collisions(label):
        for k, n in enumerate(sorted(group), 1):
            label[n] = f"{label[n]} #{k}"
    return [label[n] for n in names]


def _collisions(label: dict[str, str]) -> list[list[str]]:
    by: dict[str, list[str]] = defaultdict(list)
    for n, lab in label.items():
        by[lab].append(n)
    return [g for g in by.values() if len(g) > 1]
