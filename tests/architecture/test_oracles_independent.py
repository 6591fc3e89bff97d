"""Oracles share no code with what they check: a module of tests/helpers that is an oracle (its name ends in
``_oracle``), and every helper module it imports, imports nothing from ``tracekit.analyzers`` or
``tracekit.loader`` (nor ``analyze``/``load`` from the package root, which are those). A test helper that imports
the analyzer it checks proves nothing.

``tests/helpers/reference_loader.py`` is not an oracle of this kind: it is the loader as it was before the
speed work, kept to prove the optimisations changed no column (`test_loader_equivalence.py`), and it reuses the
loader's classification on purpose; the loader's correctness is checked against independent readings of the raw
JSON (`test_conformance_corpus.py`, `test_loader_fixtures.py`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
FORBIDDEN = ("tracekit.analyzers", "tracekit.loader")
ROOT_NAMES = {"analyze", "load", "load_file", "Analysis"}  # tracekit's re-exports of the two packages


def _imports(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) of every import in ``path``, lazy ones inside functions included."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            out.extend((a.name, ()) for a in node.names)
    return out


def _violations(path: Path, helpers: Path) -> list[str]:
    """What ``path`` and the helper modules it reaches import from the packages an oracle must not use."""
    seen: set[Path] = set()
    todo, bad = [path], []
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for module, names in _imports(p):
            if any(module == f or module.startswith(f + ".") for f in FORBIDDEN):
                bad.append(f"{p.name}: {module}")
            elif module == "tracekit" and ROOT_NAMES & set(names):
                bad.append(f"{p.name}: tracekit.{sorted(ROOT_NAMES & set(names))[0]}")
            elif module.startswith("tests.helpers."):
                todo.append(helpers / (module.rsplit(".", 1)[1] + ".py"))
            elif module == "tests.helpers":
                todo.extend(helpers / f"{n}.py" for n in names if (helpers / f"{n}.py").exists())
    return bad


ORACLES = sorted(HELPERS.glob("*_oracle.py"))


def test_there_are_oracles():
    assert ORACLES, "tests/helpers holds no *_oracle.py: the rule below would check nothing"


@pytest.mark.parametrize("oracle", ORACLES, ids=lambda p: p.stem)
def test_an_oracle_imports_neither_the_analyzers_nor_the_loader(oracle: Path):
    bad = _violations(oracle, HELPERS)
    assert not bad, f"{oracle.name} must not share code with what it checks: {bad}"


def test_the_rule_sees_a_direct_and_a_transitive_import(tmp_path: Path):
    """The checker itself: a planted direct import, one through another helper, one through the package root."""
    (tmp_path / "direct_oracle.py").write_text("from tracekit.analyzers.graph.build import build_graph\n")
    (tmp_path / "via_oracle.py").write_text("def f():\n    from tests.helpers.kin import x\n")
    (tmp_path / "kin.py").write_text("import tracekit.loader.loading\n")
    (tmp_path / "root_oracle.py").write_text("from tracekit import analyze\n")
    (tmp_path / "clean_oracle.py").write_text("import json\nimport networkx\nfrom tracekit.model.events import EventKind\n")
    assert _violations(tmp_path / "direct_oracle.py", tmp_path)
    assert _violations(tmp_path / "via_oracle.py", tmp_path) == ["kin.py: tracekit.loader.loading"]
    assert _violations(tmp_path / "root_oracle.py", tmp_path)
    assert not _violations(tmp_path / "clean_oracle.py", tmp_path)
