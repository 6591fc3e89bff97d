"""Activation memory of a run directory: ``activation_r{rank}.json`` (``ActivationRecorder.result().save``)
against the model configured from the run manifest ``run.json``.

The manifest is read defensively: the model's dimensions come from ``manifest["model"]`` (seq, batch, hidden,
heads, dtype, dropout; optional tp, cp, sp, cp_kind, recompute, attention, mask_bytes, layernorm_stat_bytes),
any of tp/cp/sp/cp_kind missing there from ``manifest["layout"]`` (tp, cp, sequence_parallel or sp, cp_kind).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import ConfigError, TracekitError
from ...formats.activation import read_activation
from ...formats.manifest import NAME as MANIFEST
from ...formats.manifest import read_manifest
from ...model.activation import ActivationMemoryResult
from ...model.dtypes import SHORT_BY_MANIFEST_NAME
from ...model.layout import CpKind, LayoutError, ParallelLayout
from ...model.traceset import TraceSet
from .activation_compare import ActivationComparison, compare_activation_memory
from .activation_model import DTYPE_BYTES, MemoryConfig

ACTIVATION_FILE = re.compile(r"^activation_r(\d+)\.json$")


def activation_files(traces: TraceSet) -> list[str]:
    """``activation_r{rank}.json`` files beside the loaded traces (the run directory), ordered by rank."""
    dirs = sorted({os.path.dirname(os.path.abspath(traces.info(r).source)) for r in traces.ranks if traces.info(r).source})
    return activation_files_in(dirs)


def activation_files_in(dirs) -> list[str]:
    """``activation_r{rank}.json`` files in these directories, ordered by rank."""
    found = []
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:  # the directory went away or cannot be read: nothing of it to compare
            continue
        for name in names:
            m = ACTIVATION_FILE.match(name)
            if m:
                found.append((int(m.group(1)), os.path.join(d, name)))
    return [p for _, p in sorted(found)]


def read_result(path: str) -> ActivationMemoryResult:
    """The per-layer part of a saved ActivationMemoryResult (see :mod:`tracekit.formats.activation`); a
    ValueError with one line when the file is not one."""
    try:
        return read_activation(path)
    except TracekitError as exc:
        raise ValueError(f"not an activation-memory result: {exc}") from None
    except OSError as exc:  # listed, then gone or unreadable (a dangling link, a file removed meanwhile)
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def config_from_manifest(manifest: Mapping) -> MemoryConfig | None:
    """The model configuration, or None when the manifest lacks seq/batch/hidden/heads. Raises a ConfigError
    (one line) for a malformed layout or model dict."""
    model: Mapping[str, Any] = manifest["model"] if isinstance(manifest.get("model"), Mapping) else {}
    if not all(isinstance(model.get(k), int) and model[k] > 0 for k in ("seq", "batch", "hidden", "heads")):
        return None
    layout = _layout(model, manifest.get("layout") if isinstance(manifest.get("layout"), Mapping) else {})
    dtype = str(model.get("dtype", "bf16")).removeprefix("torch.")
    dtype = SHORT_BY_MANIFEST_NAME.get(dtype, dtype)
    dropout = model.get("dropout", True)
    extra = {k: model[k] for k in ("recompute", "attention", "mask_bytes", "layernorm_stat_bytes") if k in model}
    return MemoryConfig.from_layout(
        layout,
        int(model["seq"]),
        int(model["batch"]),
        int(model["hidden"]),
        int(model["heads"]),
        bytes_per_element=DTYPE_BYTES.get(dtype, 2),
        dropout=bool(dropout) if not isinstance(dropout, (int, float)) else dropout > 0,
        **extra,
    )


def _layout(model: Mapping[str, Any], recorded: object) -> ParallelLayout:
    """The run's layout with the model dict's tp, cp, sp (or sequence_parallel) and cp_kind taking precedence."""
    layout = ParallelLayout.from_dict(recorded, where="run.json layout")
    pick = lambda *keys: next((model[k] for k in keys if model.get(k) is not None), None)
    tp, cp, sp, kind = pick("tp"), pick("cp"), pick("sp", "sequence_parallel"), pick("cp_kind")
    try:
        return ParallelLayout(
            tp=layout.tp if tp is None else int(tp),
            cp=layout.cp if cp is None else int(cp),
            sequence_parallel=layout.sequence_parallel if sp is None else bool(sp),
            cp_kind=layout.cp_kind if kind is None else CpKind.parse(str(kind)),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"run.json model: tp, cp, sp and cp_kind must be sizes, a flag and a name ({exc})") from None
    except LayoutError as exc:
        raise exc.at("activation model") from None


def activation_from_run(traces: TraceSet) -> tuple[ActivationComparison | None, tuple[str, ...]]:
    """The comparison (or None) and warnings for what was found but could not be used."""
    return compare_files(activation_files(traces), traces.metadata.manifest)


def activation_from_dir(run_dir) -> tuple[ActivationComparison | None, tuple[str, ...]]:
    """The same from a run directory alone (its ``run.json`` and ``activation_r*.json``), no traces loaded."""
    path = os.path.join(run_dir, MANIFEST)
    warnings: list[str] = []
    manifest: Mapping = {}
    if os.path.isfile(path):
        try:
            manifest, warnings = read_manifest(path)
        except TracekitError as exc:
            warnings = [f"activation memory: {exc}"]
    comparison, more = compare_files(activation_files_in([run_dir]), manifest)
    return comparison, (*warnings, *more)


def compare_files(files: list[str], manifest: Mapping) -> tuple[ActivationComparison | None, tuple[str, ...]]:
    if not files:
        return None, ()
    try:
        config = config_from_manifest(manifest or {})
    except TracekitError as exc:
        return None, (f"activation memory: run.json model does not configure the model ({exc})",)
    if config is None:
        return None, (
            f"activation memory: {len(files)} activation_r*.json found but run.json has no model "
            "seq/batch/hidden/heads; not compared",
        )
    results, warnings = [], []
    for path in files:
        try:
            results.append(read_result(path))
        except ValueError as exc:
            warnings.append(f"activation memory: {exc}; skipped")
    if not results:
        return None, tuple(warnings)
    return compare_activation_memory(results, config), tuple(warnings)


@dataclass(frozen=True, slots=True)
class ActivationOptions:
    """The activation-memory analyzer takes no options: it reads what the run directory holds."""


@dataclass(frozen=True, slots=True)
class ActivationRun:
    comparison: ActivationComparison | None  # None when the run recorded no activation memory
    warnings: tuple[str, ...] = ()


class ActivationMemoryAnalyzer:
    """Measured saved-for-backward bytes per layer (``activation_r{rank}.json`` beside the traces) against the
    model configured from ``run.json``."""

    name: ClassVar[str] = "activation_memory"
    Options: ClassVar[type] = ActivationOptions

    def run(self, traces: TraceSet, options: ActivationOptions = ActivationOptions()) -> ActivationRun:
        comparison, warnings = activation_from_run(traces)
        return ActivationRun(comparison, warnings)
