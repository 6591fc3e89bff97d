"""The breakdowns' oracle shares no code with what it checks (issue 28 item 4): tests/helpers/breakdown_oracle.py
imports nothing from tracekit, at module level or inside a function."""

import ast
from pathlib import Path

ORACLE = Path(__file__).resolve().parents[1] / "helpers" / "breakdown_oracle.py"


def test_the_breakdown_oracle_imports_no_tracekit():
    tree = ast.parse(ORACLE.read_text())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert imported and not [m for m in imported if m.split(".")[0] in ("tracekit", "tests")], imported
