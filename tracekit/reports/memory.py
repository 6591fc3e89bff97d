"""Activation memory on the terminal: the model's terms (`tracekit memory model`) and measured bytes per
layer against the model (`tracekit run --activation-memory`)."""

from __future__ import annotations

from typing import IO, Any

from .. import units
from ..analyzers.memory.activation_compare import ActivationComparison, ModelEstimate
from .base import StreamReporter


class MemoryTable(StreamReporter):
    """The per-layer terms with bytes and MiB, the layer total, the embedding/output terms, the saved tensors
    when listed, and the total for all layers."""

    format = "table"
    document = ModelEstimate

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        from .terminal import console as terminal_console

        console = terminal_console(file=stream)
        console.print(_terms_table(doc))
        if doc.tensors:
            console.print(_tensors_table(doc))
        total = doc.total_bytes
        console.print(
            f"total for {doc.layers} layer(s){' + embedding/output' if doc.extra_terms else ''}: "
            f"{units.grouped(total)} bytes ({total / 2**30:,.3f} GiB)"
        )
        return ()


def _terms_table(doc: ModelEstimate) -> Any:
    from rich.table import Table

    model = doc.model
    table = Table(title=f"activation memory per layer, one rank — {model.name}: {model.formula}")
    for col in ("term", "block", "divided by"):
        table.add_column(col, justify="left")
    for col in ("bytes", "MiB"):
        table.add_column(col, justify="right")
    rows = [(t.name, t.block, t.divided_by, t.bytes) for t in model.terms]
    if model.layernorm_stats_bytes:
        rows.append(("LayerNorm mean/rstd (not in the paper)", "layernorm", "", model.layernorm_stats_bytes))
    rows.append(("layer total", "", "", model.total_bytes))
    rows += [(f"{t.name} (once)", t.block, t.divided_by, t.bytes) for t in doc.extra_terms]
    for name, block, div, nbytes in rows:
        table.add_row(name, block, div, units.grouped(nbytes), f"{nbytes / 2**20:,.2f}")
    return table


def _tensors_table(doc: ModelEstimate) -> Any:
    from rich.table import Table

    tens = Table(title="saved tensors (bill of materials)")
    for col in ("tensor", "saved by", "shape", "bytes/elt", "bytes"):
        tens.add_column(col)
    for t in doc.tensors:
        tens.add_row(t.name, t.op, "×".join(map(str, t.shape)), str(t.element_bytes), units.grouped(t.bytes))
    return tens


def comparison_lines(comparison: ActivationComparison | None, warnings: tuple[str, ...]) -> list[str]:
    """Measured saved bytes per layer against the model, rank by rank (the last step), then the warnings."""
    if comparison is None:
        return [f"activation memory: {w}" for w in warnings] or ["activation memory: nothing recorded"]
    model = comparison.model
    lines = [
        f"activation memory per layer (model {model.name}: {model.formula}, paper {model.paper_bytes:,} B"
        f" + LayerNorm statistics {model.layernorm_stats_bytes:,} B)",
        f"{'rank':>4} {'layer':>5} {'measured B':>12} {'model B':>12} {'delta B':>9}",
    ]
    for row in comparison.layers:
        lines.append(
            f"{row.rank if row.rank is not None else '-':>4} {row.layer:>5} {row.measured_bytes:>12,} "
            f"{row.model_bytes:>12,} {row.delta_bytes:>+9,}"
        )
    return lines + [f"activation memory: {w}" for w in warnings]
