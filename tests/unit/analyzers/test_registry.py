"""The analyzer registry: every entry declares what it needs, the order is resolved once from those needs, and
analyze() runs the entries without knowing any of them by name."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass

import pytest

from tests.helpers.data import GPU
from tracekit import load
from tracekit.analyzers import registry
from tracekit.analyzers.registry import ANALYZERS, Analyzer, analyze, resolve, run_entries
from tracekit.loader.loading import LoadOptions


@dataclass(frozen=True)
class NoOptions:
    pass


def entry(name: str, needs: tuple[str, ...] = ()):
    cls = type(name, (), {"name": name, "Options": NoOptions, "needs": needs, "run": lambda self, t, o, i: dict(i)})
    return cls()


def test_every_entry_is_an_analyzer_and_comes_after_what_it_needs():
    seen: set[str] = set()
    for a in ANALYZERS:
        assert isinstance(a, Analyzer)
        assert set(a.needs) <= seen, f"{a.name} runs before {set(a.needs) - seen}"
        seen.add(a.name)
    assert "critical_path" in seen  # the critical path is an entry like the others


def test_the_order_comes_from_the_needs_not_the_listing():
    order = resolve([entry("c", ("b",)), entry("b", ("a",)), entry("x"), entry("a")])
    assert [e.name for e in order] == ["x", "a", "b", "c"]


@pytest.mark.parametrize(
    "entries, message",
    [
        ([entry("a", ("nope",))], "'a' needs nope, which no entry provides"),
        ([entry("a"), entry("a")], "'a' is listed twice"),
        ([entry("a", ("b",)), entry("b", ("a",))], "the needs form a cycle"),
    ],
)
def test_a_registry_that_does_not_resolve_is_refused(entries, message):
    with pytest.raises(ValueError, match=message):
        resolve(entries)


def test_analyze_knows_no_entry_by_name():
    for fn in (registry.analyze, registry.run_entries):
        tree = ast.parse(inspect.getsource(fn).lstrip())
        compared = [
            ast.unparse(n)
            for n in ast.walk(tree)
            if isinstance(n, ast.Compare)
            and any(isinstance(x, ast.Attribute) and x.attr == "name" for x in (n.left, *n.comparators))
            and any(isinstance(x, ast.Constant) for x in (n.left, *n.comparators))
        ]
        entry_names = {a.name for a in ANALYZERS}
        looked_up = [
            ast.unparse(n)
            for n in ast.walk(tree)
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value in entry_names
        ]
        assert compared == [], fn.__name__  # no `a.name == "comm"`
        assert looked_up == [], fn.__name__  # no `results["comm"]`


def test_a_new_entry_gets_the_results_it_needs(monkeypatch):
    traces = load([str(GPU / "allreduce-broadcast-2rank-rank0.json.gz")], options=LoadOptions(cache=False), executor="serial")
    probe = entry("probe", ("comm", "breakdowns"))
    monkeypatch.setattr(registry, "ANALYZERS", resolve((*ANALYZERS, probe)))
    results = run_entries(traces, {"critical_path": False})
    assert results["probe"]["comm"] is results["comm"] and results["probe"]["breakdowns"] is results["breakdowns"]
    assert results["critical_path"] is None  # opt-in
    # the same figures as the registry's own analyze()
    monkeypatch.undo()
    assert analyze(traces).comm.to_dict() == registry.assemble(results).comm.to_dict()
