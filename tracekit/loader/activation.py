"""The activation-memory files beside a run's traces (``activation_r{rank}.json``, written by the collectors), read
once with the traces and handed on in the TraceSet (``traces.metadata.activation``): the analyzer compares them with
the model and reads no file itself.

A directory that went away after its traces were read lists nothing; a listed file that cannot be opened or is not
an activation-memory result is one warning line ("...; skipped"), kept with the files for the analyzer to report.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..errors import TracekitError
from ..formats.activation import rank_of, read_activation
from ..model.activation import ActivationFiles


def activation_files_in(dirs: Iterable[str]) -> list[str]:
    """``activation_r{rank}.json`` files in these directories, ordered by rank."""
    found = []
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:  # the directory went away or cannot be read: nothing of it to compare
            continue
        for name in names:
            rank = rank_of(name)
            if rank is not None:
                found.append((rank, os.path.join(d, name)))
    return [p for _, p in sorted(found)]


def read_activation_files(dirs: Iterable[str]) -> ActivationFiles:
    """Every activation file in ``dirs``, read; the ones that do not read are warnings."""
    found = activation_files_in(dirs)
    results, warnings = [], []
    for path in found:
        try:
            results.append(read_activation(path))
        except TracekitError as exc:
            warnings.append(f"activation memory: not an activation-memory result: {exc}; skipped")
        except OSError as exc:  # listed, then gone or unreadable (a dangling link, a file removed meanwhile)
            warnings.append(f"activation memory: {path}: cannot be read ({exc.strerror or exc}); skipped")
    return ActivationFiles(tuple(found), tuple(results), tuple(warnings))


def activation_beside(paths: Iterable[str]) -> ActivationFiles:
    """The activation files in the directories of these trace files (the run directory)."""
    return read_activation_files(sorted({os.path.dirname(os.path.abspath(p)) for p in paths if p}))
