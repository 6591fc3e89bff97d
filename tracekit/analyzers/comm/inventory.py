"""What `tracekit info` reports about a loaded TraceSet: an Inventory (pure data; tracekit.reports.inventory
formats it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...loader.classify import RuleSet
from ...model.events import EventKind as K
from ...model.traceset import TraceSet


@dataclass(frozen=True, slots=True)
class Inventory:
    """Per rank: source, device, event counts by kind, steps, device streams, communication by rule and by
    op@group, process groups, the trace-format generation, warnings; ``to_dict()`` is `tracekit info --format json`."""

    world_size: int
    ranks: tuple[dict[str, Any], ...]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "ranks": list(self.ranks), "warnings": list(self.warnings)}


def describe(ts: TraceSet, rules: RuleSet | None = None, window: str | None = None) -> Inventory:
    """``window``: list the instances of that annotation as the steps (as ``analyze --window`` takes them)."""
    from .steps import plan_steps

    rules = rules or RuleSet()
    ranks = []
    for rank, t in ts:
        info = ts.info(rank)
        kinds = Counter(K(k).name.lower() for k in t["kind"].tolist())
        steps = (
            sorted(set(t["step"][t.mask_kind(K.STEP)].tolist())) if window is None else plan_steps(t, info, window).ids.tolist()
        )
        dev = t.mask_kind(K.KERNEL, K.COMM, K.MEMCPY, K.MEMSET, K.SYNC) & (t["device"] >= 0)
        streams = sorted(set(zip(t["device"][dev].tolist(), t["stream"][dev].tolist())))
        comm = t.mask_kind(K.COMM)
        names = t.decode("name_id")[comm]
        by_rule: Counter = Counter()
        uniq, counts = np.unique(names.astype(str), return_counts=True) if len(names) else (np.zeros(0, str), np.zeros(0, int))
        matched = rules.match(list(uniq))
        for _name, count, rule in zip(uniq, counts, matched):
            by_rule[rule.library if rule else "collective metadata"] += int(count)
        ops = Counter(f"{op or '?'}@{pg or '?'}" for op, pg in zip(t.decode("coll_op_id")[comm], t.decode("pg_name_id")[comm]))
        span = (int(t["ts_ns"].min()), int(t.end_ns.max())) if len(t) else (0, 0)
        candidates = window_candidates(t)
        ranks.append(
            {
                "rank": rank,
                "source": info.source,
                "world_size": info.world_size,
                "backend": info.backend,
                "device_type": info.device_type,
                "events": len(t),
                "kinds": dict(kinds),
                "steps": steps,
                "streams": [f"{d}:{s}" for d, s in streams],
                "comm_by_library": dict(by_rule),
                "collectives": dict(ops),
                "window_candidates": candidates,
                "process_groups": [pg.to_dict() for pg in info.process_groups],
                "generation": dict(info.generation),
                "span_ns": span,
                "warnings": list(info.warnings),
                "truncated": info.truncated,
            }
        )
    return Inventory(ts.metadata.world_size, tuple(ranks), tuple(ts.metadata.warnings))


def window_candidates(t, top: int = 10) -> list[list]:
    """The host annotations (NVTX ranges, record_function scopes) by count, most frequent first: the names a user can
    give ``--window`` when the trace has no ProfilerStep (as [name, count], ties by name)."""
    m = t.mask_kind(K.ANNOTATION) & (t["device"] < 0) & (t["name_id"] >= 0)
    ids, counts = np.unique(t["name_id"][m], return_counts=True)
    order = sorted(zip((-counts).tolist(), [t.strings[i] for i in ids.tolist()]))[:top]
    return [[name, -n] for n, name in order]
