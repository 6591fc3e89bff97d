"""An export's events as a Chrome trace, for the writer that adds tracekit's tracks to a trace (`tracekit
annotate`): a Kineto trace passes through as its bytes, an export has none, so its loaded ranks are written as
complete events (``ph: X``) in the trace's own time base (µs since the capture's start, ``baseTimeNanoseconds``
the capture's start), one pid per device and per host process, the categories and names the loader gave them."""

from __future__ import annotations

import msgspec
import numpy as np

from ...model.events import EventKind


def trace_members(path: str, limits) -> tuple[dict[str, msgspec.Raw], frozenset]:
    """(the top-level members of the Chrome trace, the pids its events use)."""
    from ..loading import LoadOptions
    from . import load_export

    options = LoadOptions(max_bytes=limits.max_bytes, max_string_bytes=limits.max_string_bytes)
    events: list[dict] = []
    base = 0
    for table, info in load_export(path, options):
        base = info.base_time_ns
        events += _events(table, base, info.rank)
    pids = frozenset(e["pid"] for e in events)
    members = {
        "traceEvents": msgspec.Raw(msgspec.json.encode(events)),
        "baseTimeNanoseconds": msgspec.Raw(msgspec.json.encode(base)),
        "displayTimeUnit": msgspec.Raw(b'"ns"'),
    }
    return members, pids


def _events(table, base: int, rank: int) -> list[dict]:
    keep = ~table.mask_kind(EventKind.MEMORY)
    names = np.array([*table.strings, ""], object)
    name_ids, cat_ids = table["name_id"][keep], table["cat_id"][keep]
    name = names[np.where(name_ids < 0, len(table.strings), name_ids)].tolist()
    cat = names[np.where(cat_ids < 0, len(table.strings), cat_ids)].tolist()
    ts = ((table["ts_ns"][keep] - base) / 1e3).tolist()
    dur = (table["dur_ns"][keep] / 1e3).tolist()
    dev = table["device"][keep]
    pid = np.where(dev >= 0, dev, table["pid"][keep]).tolist()
    tid = table["stream"][keep].tolist()
    corr = table["correlation"][keep].tolist()
    return [
        {"ph": "X", "cat": c, "name": n, "pid": p, "tid": t, "ts": s, "dur": d, "args": {"correlation": k, "rank": rank}}
        for c, n, p, t, s, d, k in zip(cat, name, pid, tid, ts, dur, corr)
    ]
