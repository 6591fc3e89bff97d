"""Activation memory of a run: the ``activation_r{rank}.json`` results (``ActivationRecorder.result().save``) that
the loader read beside the traces (``traces.metadata.activation``, tracekit.loader.activation) against the model
configured from the run manifest ``run.json``.

The manifest is read defensively: the model's dimensions come from ``manifest["model"]`` (seq, batch, hidden,
heads, dtype, dropout; optional tp, cp, sp, cp_kind, recompute, attention, mask_bytes, layernorm_stat_bytes),
any of tp/cp/sp/cp_kind missing there from ``manifest["layout"]`` (tp, cp, sequence_parallel or sp, cp_kind).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import ConfigError, TracekitError
from ...formats.manifest import NAME as MANIFEST
from ...formats.manifest import read_manifest
from ...loader.activation import read_activation_files
from ...model.activation import ActivationFiles
from ...model.dtypes import SHORT_BY_MANIFEST_NAME
from ...model.layout import CpKind, LayoutError, ParallelLayout
from ...model.traceset import TraceSet
from .activation_compare import ActivationComparison, compare_activation_memory
from .activation_model import DTYPE_BYTES, MemoryConfig


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
    """The comparison (or None) and warnings for what the loader found but could not be used."""
    return compare_files(traces.metadata.activation, traces.metadata.manifest)


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
    comparison, more = compare_files(read_activation_files([run_dir]), manifest)
    return comparison, (*warnings, *more)


def compare_files(files: ActivationFiles, manifest: Mapping) -> tuple[ActivationComparison | None, tuple[str, ...]]:
    """The files' results against the model that ``manifest`` configures; the files' own warnings first."""
    if not files.found:
        return None, ()
    try:
        config = config_from_manifest(manifest or {})
    except TracekitError as exc:
        return None, (*files.warnings, f"activation memory: run.json model does not configure the model ({exc})")
    if config is None:
        return None, (
            *files.warnings,
            f"activation memory: {len(files.found)} activation_r*.json found but run.json has no model "
            "seq/batch/hidden/heads; not compared",
        )
    if not files.results:
        return None, files.warnings
    return compare_activation_memory(list(files.results), config), files.warnings


@dataclass(frozen=True, slots=True)
class ActivationOptions:
    """The activation-memory analyzer takes no options: it reads what the run directory holds."""


@dataclass(frozen=True, slots=True)
class ActivationRun:
    comparison: ActivationComparison | None  # None when the run recorded no activation memory
    warnings: tuple[str, ...] = ()


class ActivationMemoryAnalyzer:
    """Measured saved-for-backward bytes per layer (the ``activation_r{rank}.json`` results the loader read beside
    the traces) against the model configured from ``run.json``."""

    name: ClassVar[str] = "activation_memory"
    Options: ClassVar[type] = ActivationOptions
    needs: ClassVar[tuple[str, ...]] = ()

    def run(self, traces: TraceSet, options: ActivationOptions = ActivationOptions(), inputs: Mapping = {}) -> ActivationRun:
        comparison, warnings = activation_from_run(traces)
        return ActivationRun(comparison, warnings)
