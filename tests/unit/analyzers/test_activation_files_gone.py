"""The activation-memory files of a run that went away under the analysis: a directory that no longer exists (the
traces were read, then the run directory removed) and a listed file that cannot be opened (a dangling link) are a
warning and no comparison, never an OSError traceback."""

from __future__ import annotations

import os

from tracekit.analyzers.memory.activation_run import compare_files
from tracekit.loader.activation import activation_files_in, read_activation_files

MODEL = {"model": {"seq": 16, "batch": 1, "hidden": 32, "heads": 2}}


def test_a_directory_gone_lists_nothing(tmp_path):
    assert activation_files_in([str(tmp_path / "gone")]) == []


def test_a_listed_file_that_cannot_be_read_is_skipped_with_a_warning(tmp_path):
    os.symlink(tmp_path / "nowhere.json", tmp_path / "activation_r0.json")
    files = read_activation_files([str(tmp_path)])
    assert files.found == (str(tmp_path / "activation_r0.json"),) and not files.results
    comparison, warnings = compare_files(files, MODEL)
    assert comparison is None and len(warnings) == 1
    assert "activation_r0.json" in warnings[0] and warnings[0].endswith("skipped")
