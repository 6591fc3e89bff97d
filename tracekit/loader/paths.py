"""Which files a set of paths names: directories listed, globs expanded, sidecar files (the run manifest,
activation-memory results, dot files) left out. A module of its own, importing no numpy or pandas, so that a
command can check its output paths against its inputs (and the analysis cache key them) before it loads."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence

from ..errors import TraceFormatError
from ..formats.manifest import NAME as MANIFEST

TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep")  # Kineto traces; Nsight Systems exports and reports


def find_traces(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """Expand directories (their *.json / *.json.gz), globs and plain files into a sorted list of files."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    found: list[str] = []
    for item in items:
        item = os.fspath(item)
        if os.path.isdir(item):
            try:
                names = sorted(os.listdir(item))
            except OSError as exc:
                raise TraceFormatError(f"{item}: cannot list the directory ({exc.strerror or exc})") from None
            found += [os.path.join(item, f) for f in names if f.endswith(TRACE_SUFFIXES) and not _sidecar(f, names)]
        elif os.path.lexists(item):  # before the glob: a file named 'rank0[1].json' is that file, not a pattern
            found.append(item)
        elif any(ch in item for ch in "*?["):
            found += sorted(p for p in glob.glob(item) if p.endswith(TRACE_SUFFIXES))
        else:
            raise TraceFormatError(f"{item}: no such file or directory; pass a trace file, a directory or a glob")
    if not found:
        raise TraceFormatError(
            f"{', '.join(str(os.fspath(i)) for i in items)}: no *.json or *.json.gz traces (nor Nsight *.sqlite / *.nsys-rep "
            "exports) found"
        )
    return found


def _sidecar(name: str, names: Sequence[str] = ()) -> bool:
    """A run directory's other files: the manifest and activation-memory results (not traces), and a report whose
    SQLite export lies beside it (``nsys profile --export sqlite`` writes both: the export is read, once)."""
    if name.endswith(".nsys-rep") and name[: -len(".nsys-rep")] + ".sqlite" in names:
        return True
    return name == MANIFEST or name.startswith(".") or re.fullmatch(r"activation_r\d+\.json", name) is not None
