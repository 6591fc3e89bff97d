"""Names of a package imported on first use (PEP 562), so that importing one submodule of a package costs only
that module: the packages' ``__init__`` files list which module defines each public name and take their
``__getattr__`` from here."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps a name to the (relative) module that defines it;
    the value is kept in ``namespace`` (the package's globals) so the next access is a plain lookup."""

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(table[name], package), name)
        namespace[name] = value
        return value

    return __getattr__
