"""`tracekit diff A B` as text: one line per dimension/op, then the call sites whose exposed time changed most."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from .. import units
from ..gate.diff import DiffResult
from .base import StreamReporter
from .safe_text import printable


class DiffText(StreamReporter):
    """The diff's plain-text tables (control characters from trace names shown escaped)."""

    format = "text"
    document = DiffResult

    def write(self, doc: Any, stream: IO[Any], **_: Any) -> tuple[str, ...]:
        stream.write(printable(render_text(doc), multiline=True))
        return ()


def _pair(a: float | None, b: float | None, unit: str = "", digits: int = 1) -> str:
    fa = units.NA if a is None else f"{a:.{digits}f}"
    fb = units.NA if b is None else f"{b:.{digits}f}"
    return f"{fa}→{fb}{unit}"


def _ov(row: Mapping[str, float | None]) -> float | None:
    c, e = row.get("comm_us"), row.get("exposed_comm_us")
    return None if not c or e is None else 1 - e / c


def render_text(result: DiffResult) -> str:
    """Plain-text tables: one line per dimension/op, then the call sites that changed most."""
    lines = [f"A: {result.a_source}", f"B: {result.b_source}"] + [f"note: {n}" for n in result.notes]
    header = f"{'':<40} {'exposed µs A→B':>22} {'Δ µs':>9} {'overlap':>11} {'comm µs A→B':>22} {'wait µs A→B':>20}"
    for title, rows in (
        ("per dimension/op (medians over steps)", result.by_dimension),
        ("per call site (largest changes)", result.by_call_site),
    ):
        lines += ["", title, header]
        for r in rows:
            lines.append(
                f"{r.label[:40]:<40} {_pair(r.a.get('exposed_comm_us'), r.b.get('exposed_comm_us')):>22} "
                f"{r.exposed_delta_us:>+9.1f} {_pair(_ov(r.a), _ov(r.b), digits=2):>11} "
                f"{_pair(r.a.get('comm_us'), r.b.get('comm_us')):>22} "
                f"{_pair(r.a.get('wait_us'), r.b.get('wait_us')):>20}"
            )
            if r.reasons:
                lines.append(f"{'':<4}why: " + "; ".join(r.reasons))
    return "\n".join(lines) + "\n"
