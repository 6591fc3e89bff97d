"""Short kernel names: a C++ signature reduced to its qualified name and first template arguments.

    void dpsk::ep::internode::cached_notify<false>(int, int, ...)      -> dpsk::ep::internode::cached_notify<false>
    void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(int, ...)
                                                                        -> at::native::vectorized_elementwise_kernel<4, …>
    ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)  -> ncclDevKernel_AllGather_RING_LL

The return type and the parameter list go; of each template argument list only the first argument stays (itself
shortened the same way), the rest become ``…``. A first argument that is a function-local type (a lambda inside
``f(...)``) keeps the enclosing function's name: ``f(…)``. ``(anonymous namespace)`` is part of a qualified name.
Names that are not C++ signatures (``volta_sgemm_128x32_nt``, ``Memcpy HtoD (Pageable -> Device)``, Tensile's
``Cijk_…``) come back unchanged. Never raises: unbalanced brackets give the name up to its parameter list.
"""

from __future__ import annotations

import functools

ELLIPSIS = "…"
_ANON = "(anonymous namespace)"
_ANON_MARK = "\x00"  # stands for "(anonymous namespace)" while parsing
_OPEN = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_VERBATIM = ("Memcpy", "Memset", "dma", "Event ", "Stream ", "Context ")  # copies, sets and syncs: kept as they are


@functools.lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """The qualified name and first template arguments of a kernel signature (see the module docstring)."""
    if not name or name.startswith(_VERBATIM) or ("<" not in name and "(" not in name):
        return name
    text = name.replace(_ANON, _ANON_MARK).replace("->", "")
    try:
        out = _function_name(text)
    except ValueError:
        out = text.split("(", 1)[0].strip() or text
    return out.replace(_ANON_MARK, _ANON) or name


def _function_name(text: str) -> str:
    """Cut the parameter list, drop the return type, shorten the template arguments."""
    cut = _top_level_index(text, "(")
    if cut is None:
        return _shorten_templates(text.strip())
    head = text[:cut].rstrip()
    tokens = _top_level_split(head, " ")
    return _shorten_templates(tokens[-1] if tokens else head)


def _top_level_index(text: str, char: str) -> int | None:
    """Index of the first ``char`` outside every bracket; raises ValueError on unbalanced brackets."""
    stack: list[str] = []
    for i, c in enumerate(text):
        if not stack and c == char:
            return i
        if c in _OPEN:
            stack.append(c)
        elif c in _CLOSE:
            if not stack or stack[-1] != _CLOSE[c]:
                raise ValueError(text)
            stack.pop()
    return None


def _top_level_split(text: str, sep: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _shorten_templates(qualified: str) -> str:
    """Each ``<...>`` at the top level keeps its first argument (shortened) and ``…`` for the others."""
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
        first = _shorten_argument(args[0]) if args else ""
        out.append("<" + first + (f", {ELLIPSIS}" if len(args) > 1 else "") + ">")
        i = close + 1
    return "".join(out)


def _shorten_argument(arg: str) -> str:
    if arg.startswith("(") and _top_level_index(arg, " ") is None:  # a cast such as (cudnnKernelDataType_t)2
        return arg
    return _shorten_templates(arg)


def _matching(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPEN:
            depth += 1
        elif text[i] in _CLOSE:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(text)
