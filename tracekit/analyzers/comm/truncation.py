"""How much a truncated rank lost, in words for the summary's warnings.

A trace cut short (the loader salvaged its complete events: ``RankInfo.truncated``) does not say how much it lost:
Kineto writes the host events first and the device activity after them in flush order, so what is missing past the
cut is unknown from the file. What can be said: the device events kept, and, where the run has whole ranks of the
same device type, how many that is against a whole rank (the median of theirs per profiled step): every rank of one
job runs the same steps, so the ratio estimates the share recovered. And what can help: letting the export finish;
``--allow-partial`` to read what was kept, its steps marked partial and out of every total.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ... import units
from ...model.events import DEVICE_KINDS, EventKind
from ...model.traceset import TraceSet


@dataclass(frozen=True, slots=True)
class DeviceEvents:
    """A rank's device events, and per profiled step (None without steps): what ``loss_warnings`` compares, counted
    where the rank is analysed so that the parent needs no table."""

    kept: int
    per_step: float | None


def device_events(table) -> DeviceEvents:
    kept = int(np.count_nonzero(table.mask_kind(*DEVICE_KINDS)))
    steps = int(np.count_nonzero(table.mask_kind(EventKind.STEP)))
    return DeviceEvents(kept, kept / steps if steps else None)


def loss_warnings(traces: TraceSet, counts: Mapping[int, DeviceEvents] | None = None) -> list[str]:
    """One warning per truncated rank that has device activity (a CPU-only rank's cut is its steps' business).
    ``counts``: rank -> its DeviceEvents; without it, counted from the tables (only when a rank is truncated)."""
    infos = {r: traces.info(r) for r in traces.ranks}
    whole = [r for r, i in infos.items() if not i.truncated]
    out = []
    for r, info in infos.items():
        if not info.truncated or info.activities_whole or info.device_type == "cpu":
            continue
        if counts is None:
            counts = {q: device_events(traces.table(q)) for q in traces.ranks}
        kept, mine = counts[r].kept, counts[r].per_step
        peers = [p for p in (counts[w].per_step for w in whole if infos[w].device_type == info.device_type) if p]
        if peers and mine is not None:
            share = mine / float(np.median(peers))
            est = (
                f"about {units.percent(min(share, 1.0))} of the device events per step of the {len(peers)} whole "
                f"rank{'s' if len(peers) != 1 else ''} (their median): the rest was lost at the cut"
            )
        else:
            est = "no whole rank to compare with, so how many were lost is unknown"
        out.append(
            f"rank {r}: truncated trace: kept {units.grouped(kept)} device events, {est}; every step may miss device "
            "work, so its figures are partial and out of every total (`--allow-partial` shows them); to get them "
            "whole, let the profiler finish writing the trace"
        )
    return out
