"""The stages of the pipeline, checked on the import graph of the package (every import, lazy ones too).

collect -> load -> TraceSet -> analyze -> results -> report, with the gate beside the reports and the CLI on top:
a module may import its own package and the packages of earlier stages, never a later stage, and no set of
modules imports each other in a cycle. docs/architecture.md draws the same picture.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "tracekit"

# package -> the packages it may import (besides itself). Top-level modules count as their own package.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_version": set(),
    "_lazy": set(),
    "units": set(),
    "runtime": {"errors"},
    "model": {"errors", "_lazy"},
    "formats": {"errors", "_version", "model", "runtime", "units"},
    "loader": {"errors", "_lazy", "model", "formats", "runtime", "units"},
    "collectors": {"errors", "_version", "model", "formats", "runtime", "units"},
    "analyzers": {"errors", "_version", "_lazy", "model", "formats", "loader", "runtime", "units"},
    "gate": {"errors", "_version", "_lazy", "model", "formats", "loader", "analyzers", "runtime", "units"},
    "reports": {"errors", "_version", "model", "formats", "analyzers", "gate", "runtime", "units"},
    "pytest_plugin": {"errors", "model", "formats", "loader", "analyzers", "gate", "reports", "collectors", "runtime", "units"},
    "__init__": {"errors", "_version", "model", "formats", "loader", "analyzers", "collectors", "runtime", "units"},
    "cli": {"errors", "_version", "model", "formats", "loader", "analyzers", "gate", "reports", "collectors", "runtime", "units"},
    "__main__": {"cli"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The tracekit modules ``name`` imports: ``from . import x`` names the submodule x when there is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "tracekit" or m.startswith("tracekit.")}


@functools.cache  # one parse of the package per session, not one per parametrized module
def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) - {name} for name, path in mods.items()}


def _stage(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def test_every_package_has_a_stage() -> None:
    assert {_stage(m) for m in _modules()} <= set(ALLOWED)


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_imports_a_later_stage(module: str) -> None:
    stage = _stage(module)
    bad = sorted(t for t in _graph()[module] if _stage(t) != stage and _stage(t) not in ALLOWED[stage])
    assert not bad, f"{module} ({stage}) imports {bad}; allowed: {sorted(ALLOWED[stage])}"


def test_no_import_cycles() -> None:
    """Tarjan's strongly connected components over module -> module edges; package __init__ re-exports count
    as the imports they are. A component of more than one module is a cycle."""
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_graph_sees_a_planted_cycle_and_a_planted_upward_import(tmp_path: Path) -> None:
    """The checker itself: a known cycle and a known upward import are found (a test that cannot fail is a
    defect)."""
    pkg = tmp_path / "tracekit"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model" / "__init__.py").write_text("")
    (pkg / "model" / "a.py").write_text("from . import b\nfrom ..cli import main\n")
    (pkg / "model" / "b.py").write_text("from .a import x\n")
    mods = {_module_name_in(p, tmp_path): p for p in pkg.rglob("*.py")}
    known = set(mods)
    a = _imports("tracekit.model.a", mods["tracekit.model.a"], known)
    b = _imports("tracekit.model.b", mods["tracekit.model.b"], known)
    assert "tracekit.model.b" in a and "tracekit.model.a" in b  # the cycle's two edges
    assert "cli" not in ALLOWED["model"] and any(_stage(t) == "cli" for t in a)


def _module_name_in(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_architecture_doc_names_every_package_and_module_it_mentions():
    """docs/architecture.md matches the tree: its package table lists every subpackage, and every module it
    names as `pkg/module.py` exists."""
    import re

    doc = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    table = set(re.findall(r"^\| `(\w+)` \| (?!may)", doc, flags=re.M))
    assert packages <= table, packages - table
    for pkg, mod in re.findall(r"`(\w+)/(\w+)\.py`", doc):
        if pkg in packages:
            assert (ROOT / pkg / f"{mod}.py").exists(), f"{pkg}/{mod}.py"
    for mod in re.findall(r"\((\w+)\.py", doc):  # "(registry.py)" after a package's description
        assert any(ROOT.rglob(f"{mod}.py")), mod
