"""`tracekit diff A B`: per dimension × op and per collective call site, what became more exposed, and why.

Per row the medians over steps (per rank, then across ranks) of comm, exposed, hidden, wait, transfer and bytes.
The change in exposed time splits exactly into two parts, with ov = 1 − exposed/comm on each side:

    exposed_B − exposed_A = (comm_B − comm_A)·(1 − ov_A)  +  comm_B·(ov_A − ov_B)
                            └ more communication time ┘    └── less overlap ──┘

and the first part is shown with what drove it: more waiting for peers (wait), a longer transfer, more bytes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import units
from ..formats.contract import DIFF_SCHEMA
from ..formats.core import to_builtins
from ..formats.documents import DiffDoc, DiffFigures, DiffRowDoc
from ..formats.summary import CollectiveRow
from .metrics import RunMetrics, Scope
from .stats import stat_over_ranks

_ROW_METRICS = ("count", "bytes", "comm_us", "hidden_comm_us", "exposed_comm_us", "wait_us", "transfer_us")
_SITE_FIELDS = {
    "bytes": "bytes",
    "comm_us": "dur_us",
    "hidden_comm_us": "hidden_us",
    "exposed_comm_us": "exposed_us",
    "wait_us": "wait_us",
    "transfer_us": "transfer_us",
}


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One dimension/op or call site on both sides; ``a``/``b`` map metric -> median (None if absent)."""

    label: str
    a: Mapping[str, float | None]
    b: Mapping[str, float | None]
    more_comm_us: float  # part of the exposed change due to more communication time
    less_overlap_us: float  # part due to a lower overlap ratio
    reasons: tuple[str, ...]

    @property
    def exposed_delta_us(self) -> float:
        return (self.b.get("exposed_comm_us") or 0.0) - (self.a.get("exposed_comm_us") or 0.0)

    def to_struct(self) -> DiffRowDoc:
        return DiffRowDoc(
            label=self.label,
            a=_figures(self.a),
            b=_figures(self.b),
            exposed_delta_us=_finite(self.exposed_delta_us),
            more_comm_us=_finite(self.more_comm_us),
            less_overlap_us=_finite(self.less_overlap_us),
            reasons=list(self.reasons),
        )

    def to_dict(self) -> dict[str, Any]:
        return to_builtins(self.to_struct())


def _finite(v: float) -> float | None:
    """Written null where the split overflowed (an exposed time far above its comm time, 1e18 over 5e-324 µs):
    never a NaN or Infinity token, and never a made-up 0."""
    return v if math.isfinite(v) else None


def _figures(side: Mapping[str, float | None]) -> DiffFigures:
    return DiffFigures(**{k: None if v is None or not math.isfinite(v) else v for k, v in side.items()})


def _num(v: float | None) -> float:
    return 0.0 if v is None else float(v)


def explain(label: str, a: Mapping[str, float | None], b: Mapping[str, float | None], floor_us: float = 1.0) -> DiffRow:
    """Split the change in exposed time (the decomposition in the module docstring) and name the causes."""
    ca, cb, ea, eb = (
        _num(a.get("comm_us")),
        _num(b.get("comm_us")),
        _num(a.get("exposed_comm_us")),
        _num(b.get("exposed_comm_us")),
    )
    ov_a = 1 - ea / ca if ca else None
    ov_b = 1 - eb / cb if cb else None
    ov_a = ov_b if ov_a is None else ov_a
    ov_b = ov_a if ov_b is None else ov_b
    ov_a, ov_b = ov_a or 0.0, ov_b or 0.0
    more_comm = (cb - ca) * (1 - ov_a)
    less_overlap = cb * (ov_a - ov_b)
    # each cause named in the direction it moved the exposed time (an improved row gets its own reasons)
    reasons: list[tuple[float, str]] = []
    if abs(less_overlap) > floor_us:
        reasons.append(
            (less_overlap, f"{'less' if less_overlap > 0 else 'more'} overlap ({ov_a:.2f}→{ov_b:.2f}): {_signed(less_overlap)}")
        )
    if a.get("wait_us") is not None and b.get("wait_us") is not None:
        w = (_num(b["wait_us"]) - _num(a["wait_us"])) * (1 - ov_a)
        if abs(w) > floor_us:
            reasons.append(
                (
                    w,
                    f"{'more' if w > 0 else 'less'} waiting for peers (wait {_num(a['wait_us']):.1f}→"
                    f"{_num(b['wait_us']):.1f} µs): {_signed(w)}",
                )
            )
    t = None
    if a.get("transfer_us") is not None and b.get("transfer_us") is not None:
        t = (_num(b["transfer_us"]) - _num(a["transfer_us"])) * (1 - ov_a)
    known = a.get("bytes") is not None and b.get("bytes") is not None  # unknown sizes explain nothing
    ba, bb = _num(a.get("bytes")), _num(b.get("bytes"))
    grew = f"bytes {ba:.0f}→{bb:.0f}, {((bb - ba) / ba * 100 if ba else 100):+.0f}%" if known and bb > ba * 1.01 else ""
    shrank = f"bytes {ba:.0f}→{bb:.0f}, {(bb - ba) / ba * 100:+.0f}%" if known and ba and bb < ba * 0.99 else ""
    moved = grew or shrank
    if t is not None and abs(t) > floor_us:
        reasons.append((t, f"{'longer' if t > 0 else 'shorter'} transfer ({moved or 'same bytes'}): {_signed(t)}"))
    elif t is None and abs(more_comm) > floor_us:
        reasons.append(
            (
                more_comm,
                f"{'more' if more_comm > 0 else 'less'} communication time{f' ({moved})' if moved else ''}: {_signed(more_comm)}",
            )
        )
    elif moved:
        reasons.append((0.0, f"{'more' if grew else 'fewer'} bytes ({moved})"))
    return DiffRow(
        label, dict(a), dict(b), more_comm, less_overlap, tuple(text for _, text in sorted(reasons, key=lambda r: -abs(r[0])))
    )


def _signed(us: float) -> str:
    """``+40.0 µs`` / ``−12.5 µs``: what a cause added to (or took from) the exposed time."""
    return f"+{units.micros(us)}" if us >= 0 else f"−{units.micros(-us)}"


def _scope_values(s: RunMetrics, scope: Scope) -> dict[str, float | None]:
    out = {}
    for m in _ROW_METRICS:
        st = s.stat(m, scope)
        out[m] = None if st is None else st.median
    return out


def _site_values(s: RunMetrics) -> dict[tuple, dict[str, float | None]]:
    """Call sites: the k-th collective of a process group and op within a step (in ``seq`` order; instances
    without a ``seq`` first, then by start), medians over steps/ranks."""
    per_step: dict[tuple, list[CollectiveRow]] = defaultdict(list)
    for c in s.collectives:
        per_step[(c.rank, c.step, c.pg_name, c.op)].append(c)
    samples: dict[tuple, dict[str, dict[int, list]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for (rank, _step, pg, op), rows in per_step.items():
        rows.sort(key=lambda c: (-1 if c.seq is None else c.seq, float(c.start_us)))
        for k, c in enumerate(rows):
            site = (c.dimension or "unknown", op, c.pg_desc or pg, k)
            for metric, field in _SITE_FIELDS.items():
                samples[site][metric][rank].append(getattr(c, field))
    out = {}
    for site, by_metric in samples.items():
        out[site] = {m: (None if (st := stat_over_ranks(by_metric[m])) is None else st.median) for m in _SITE_FIELDS}
    return out


@dataclass(frozen=True, slots=True)
class DiffResult:
    a_source: str
    b_source: str
    by_dimension: tuple[DiffRow, ...]
    by_call_site: tuple[DiffRow, ...]
    notes: tuple[str, ...] = ()

    def to_struct(self) -> DiffDoc:
        """The diff as ``tracekit diff --format json`` writes it (formats.documents.DiffDoc)."""
        return DiffDoc(
            schema=DIFF_SCHEMA,
            a=self.a_source,
            b=self.b_source,
            notes=list(self.notes),
            by_dimension=[r.to_struct() for r in self.by_dimension],
            by_call_site=[r.to_struct() for r in self.by_call_site],
        )

    def to_dict(self) -> dict[str, Any]:
        return to_builtins(self.to_struct())


def diff(a: RunMetrics, b: RunMetrics, top: int = 10, floor_us: float = 1.0) -> DiffResult:
    """Rows for every dimension/op of either run and the ``top`` call sites whose exposed time changed most."""
    scopes = sorted(set(a.scopes()) | set(b.scopes()), key=lambda s: (s.dimension, s.op))
    rows = [explain(s.label, _scope_values(a, s), _scope_values(b, s), floor_us) for s in scopes]
    rows.append(
        explain(
            "whole run", {m: _median(a, m) for m in _ROW_METRICS[2:5]}, {m: _median(b, m) for m in _ROW_METRICS[2:5]}, floor_us
        )
    )
    sa, sb = _site_values(a), _site_values(b)
    sites = [
        explain(f"{d}/{op}#{k} ({pg})", sa.get((d, op, pg, k), {}), sb.get((d, op, pg, k), {}), floor_us)
        for (d, op, pg, k) in sorted(set(sa) | set(sb))
    ]
    sites.sort(key=lambda r: -abs(r.exposed_delta_us))
    notes = tuple(
        f"{k} differs: A {a.identity()[k]}, B {b.identity()[k]}" for k in a.identity() if a.identity()[k] != b.identity()[k]
    )
    return DiffResult(a.source, b.source, tuple(rows), tuple(sites[:top]), notes)


def _median(s: RunMetrics, metric: str) -> float | None:
    st = s.run_stat(metric)
    return None if st is None else st.median
