"""The packages whose names are imported on first use (PEP 562): each lazy name resolves to what the module
defines, and none is also the name of a submodule (importing that submodule would put the module object where
the function was: `gate.diff` is both, and is therefore imported eagerly)."""

import importlib
import pkgutil
import subprocess
import sys

import pytest

LAZY_PACKAGES = ["tracekit", "tracekit.analyzers", "tracekit.gate", "tracekit.loader", "tracekit.model"]


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_lazy_name_resolves_and_none_is_a_submodule(name):
    pkg = importlib.import_module(name)
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    lazy = pkg._LAZY
    assert not set(lazy) & submodules
    for attr, module in lazy.items():
        value = getattr(pkg, attr)
        assert value is getattr(importlib.import_module(module, name), attr)
    for attr in pkg.__all__:
        assert getattr(pkg, attr) is not None


def test_a_submodule_import_leaves_the_gate_functions_callable():
    code = "import tracekit.gate.diff, tracekit.gate.compare, tracekit.gate as g; assert callable(g.diff) and callable(g.compare)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reading_a_saved_summary_imports_no_pandas():
    """What a warm `tracekit analyze` imports (tracekit/formats/analysis_cache.py) and the reporters' table:
    neither pulls in pandas or pyarrow through a package's __init__."""
    code = (
        "import sys, tracekit.cli.analyze, tracekit.cli.output, tracekit.formats.analysis_cache, tracekit.reports; "
        "from tracekit.cli.common import input_files; input_files(['.']); "
        "heavy = [m for m in ('pandas', 'pyarrow', 'rich', 'jinja2') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
