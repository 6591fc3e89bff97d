import numpy as np

from tracekit.model.events import EventTable
from tracekit.model.traceset import RankInfo, RunMetadata, TraceSet


def table(rows, shuffle_seed=None):
    rows = list(rows)
    if shuffle_seed is not None:
        rows = [rows[i] for i in np.random.default_rng(shuffle_seed).permutation(len(rows))]
    return EventTable.from_rows(rows)


def ev(kind, ts, dur, step=-1, stream=7, **kw):
    return {"kind": kind, "ts_ns": ts, "dur_ns": dur, "step": step, "stream": stream, **kw}


def traceset(tables, device_type="cuda", world_size=None, **md):
    infos = {r: RankInfo(rank=r, world_size=world_size or len(tables), device_type=device_type) for r in tables}
    return TraceSet(dict(tables), infos, RunMetadata(world_size=world_size or len(tables), **md))
