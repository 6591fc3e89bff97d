"""Chart data and the one-line reading under each chart, picked from a ``tracekit.summary/1`` dict.

Every series is a copy of summary values (no new measurement). Strings from the trace stay raw here: the
page's script escapes them for plotly, and jinja's autoescape covers the readings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import units
from ..analyzers.names import short_name
from .view import top_exposed


def _f(v) -> float:
    return float(v or 0.0)


def axis(values_us) -> dict:
    """The unit a chart's duration axis reads in, chosen by its largest value (``{"unit": "ms", "scale": 1000.0}``:
    the script divides the µs values by ``scale``), as a table column would (units.duration_scale)."""
    unit, scale = units.duration_scale(max((abs(float(v)) for v in values_us if v is not None), default=0.0))
    return {"unit": unit, "scale": scale}


def _size(nbytes) -> str:
    """A collective's size in words: a size the trace did not record (0 or None) is said so, never ``0 B``."""
    return units.size(nbytes) if nbytes else "size not recorded"


def by_dimension(summary: Mapping) -> dict:
    rows = summary.get("by_dimension") or []
    labels = [f"{r.get('dimension') or 'unknown'} · {r.get('op', '')}" for r in rows]
    data: dict[str, Any] = {
        "labels": labels,
        "hidden_us": [_f(r.get("hidden_comm_us")) for r in rows],
        "exposed_us": [_f(r.get("exposed_comm_us")) for r in rows],
    }
    data["axis"] = axis(data["hidden_us"] + data["exposed_us"])
    if not rows:
        return {**data, "reading": "No communication was found."}
    worst = max(range(len(rows)), key=lambda i: (data["exposed_us"][i], -i))
    comm = _f(rows[worst].get("comm_us"))
    share = data["exposed_us"][worst] / comm if comm > 0 else None
    data["reading"] = (
        f"{labels[worst]} exposes the most communication: {units.duration(data['exposed_us'][worst])} "
        f"over all ranks ({units.percent(share)} of its time is not hidden by compute)."
    )
    return data


def heatmap(summary: Mapping) -> dict:
    ranks = summary.get("ranks") or []
    steps = sorted({s["step"] for r in ranks for s in r.get("steps", [])})
    col = {s: j for j, s in enumerate(steps)}
    z: list[list[float | None]] = [[None] * len(steps) for _ in ranks]
    for i, r in enumerate(ranks):
        for s in r.get("steps", []):
            z[i][col[s["step"]]] = _f(s.get("exposed_comm_us"))
    data: dict[str, Any] = {"ranks": [r["rank"] for r in ranks], "steps": steps, "z": z}
    data["axis"] = axis([v for row in z for v in row])
    cells = [(v, i, j) for i, row in enumerate(z) for j, v in enumerate(row) if v is not None]
    if not cells:
        return {**data, "reading": "No steps were found."}
    v, i, j = max(cells, key=lambda c: (c[0], -c[1], -c[2]))
    mean = sum(c[0] for c in cells) / len(cells)
    data["reading"] = (
        f"Rank {data['ranks'][i]} in step {steps[j]} has the most exposed communication "
        f"({units.duration(v)}; the mean rank-step has {units.duration(mean)})."
    )
    return data


def top_collectives(summary: Mapping, n: int = 20) -> dict:
    cols = summary.get("collectives") or []
    idx = top_exposed(summary, n)
    rows = [cols[i] for i in idx]
    labels = [
        f"#{k + 1} r{c.get('rank')} {_step(c.get('step'), short=True)} {c.get('dimension') or '?'} {c.get('op', '')}"
        for k, c in enumerate(rows)
    ]
    data: dict[str, Any] = {
        "labels": labels,
        "names": [short_name(str(c.get("name") or "")) for c in rows],
        "exposed_us": [_f(c.get("exposed_us")) for c in rows],
        "hidden_us": [_f(c.get("hidden_us")) for c in rows],
        "wait_us": [c.get("wait_us") for c in rows],
        "transfer_us": [c.get("transfer_us") for c in rows],
    }
    data["axis"] = axis([_f(c.get("dur_us")) for c in rows])
    if not rows:
        return {**data, "reading": "No collectives were found."}
    c = rows[0]
    wait = c.get("wait_us")
    split = (
        ""
        if wait is None
        else f"; {units.duration(wait)} of it was waiting for a late peer and {units.duration(c.get('transfer_us'))} transfer"
    )
    data["reading"] = (
        f"The most exposed collective is {c.get('op', '')} on {c.get('dimension') or 'an unknown dimension'} "
        f"(rank {c.get('rank')}, {_step(c.get('step'))}, {_size(c.get('bytes'))}): "
        f"{units.duration(c.get('exposed_us'))} exposed{split}."
    )
    return data


def _step(step, short: bool = False) -> str:
    """``step 3`` (``s3``); a collective outside every step (-1) reads "outside steps"."""
    if isinstance(step, int) and step < 0:
        return "outside steps"
    return f"s{step}" if short else f"step {step}"


def stragglers(summary: Mapping) -> dict:
    rows = summary.get("stragglers") or []
    offs = summary.get("clock_offsets") or []
    data: dict[str, Any] = {
        "ranks": [r["rank"] for r in rows],
        "caused_wait_us": [_f(r.get("total_caused_wait_us")) for r in rows],
        "offset_ranks": [o["rank"] for o in offs],
        "offset_us": [_f(o.get("offset_us")) for o in offs],
        "spread_us": [_f(o.get("spread_us")) for o in offs],
        "offset_reading": "",
    }
    data["axis"] = axis(data["caused_wait_us"])
    data["offset_axis"] = axis([abs(_f(o.get("offset_us"))) + _f(o.get("spread_us")) for o in offs])
    if rows:
        w = max(rows, key=lambda r: _f(r.get("total_caused_wait_us")))
        data["reading"] = (
            f"Rank {w['rank']} arrived last in {w.get('last_arrivals')} of {w.get('instances')} "
            f"collectives and made its peers wait {units.duration(w.get('total_caused_wait_us'))} in all."
        )
    else:
        data["reading"] = "No cross-rank matching: load more than one rank to see stragglers."
    applied = [o for o in offs if o.get("applied", True) and o.get("method") != "reference"]
    if applied:  # offsets inside their error bound are not corrections: the page's clock note says so, once
        o = max(applied, key=lambda o: abs(_f(o.get("offset_us"))))
        data["offset_reading"] = (
            f"The largest estimated clock offset is rank {o['rank']}: {units.duration(o.get('offset_us'))} "
            f"± {units.duration(o.get('spread_us'))} from {o.get('matched')} matched collectives."
        )
    return data


def memory(summary: Mapping) -> dict | None:
    layers = (summary.get("activation_memory") or {}).get("layers") or []
    if not layers:
        return None
    data: dict[str, Any] = {
        "labels": [f"r{x.get('rank')} L{x.get('layer')}" for x in layers],
        "measured_bytes": [x.get("measured_bytes") for x in layers],
        "model_bytes": [x.get("model_bytes") for x in layers],
    }
    top = max((float(v) for v in data["measured_bytes"] + data["model_bytes"] if v is not None), default=0.0)
    unit, scale = units.bytes_scale(top)
    data["axis"] = {"unit": unit, "scale": scale}
    pairs = [(x, _f(x.get("measured_bytes")) / _f(x.get("model_bytes"))) for x in layers if x.get("model_bytes")]
    if pairs:
        x, r = max(pairs, key=lambda p: abs(p[1] - 1.0))
        data["reading"] = (
            f"Measured activation memory is within {units.percent(abs(r - 1.0))} of the "
            f"{x.get('model', '')} model on every layer (largest gap: rank {x.get('rank')}, "
            f"layer {x.get('layer')})."
        )
    else:
        data["reading"] = "Measured activation memory per layer (no model figure to compare with)."
    return data
