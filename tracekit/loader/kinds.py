"""Event kinds from categories and the unique names, and each event's ProfilerStep."""

from __future__ import annotations

import re

import numpy as np

from ..model.events import ABSENT
from ..model.events import EventKind as K
from .classify import HOST_COMM_OP, RuleSet

DEVICE_CATS = {"kernel": K.KERNEL, "gpu_memcpy": K.MEMCPY, "gpu_memset": K.MEMSET, "cuda_sync": K.SYNC,
               "gpu_user_annotation": K.ANNOTATION}
HOST_CATS = {"cpu_op": K.CPU_OP, "user_annotation": K.ANNOTATION, "cuda_runtime": K.RUNTIME,
             "cuda_driver": K.RUNTIME, "cpu_instant_event": K.MEMORY, "python_function": K.OTHER}
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")


def _per_name(names: list[str], test, codes) -> np.ndarray:
    return np.array([bool(test(n)) for n in names] or [False], dtype=bool)[codes]


def classify_kinds(cat_codes, cats, name_codes, names, rules: RuleSet, has_coll) -> tuple[np.ndarray, np.ndarray]:
    """(kind, is_device) per row. Rules run on the unique names only."""
    cat_kind = np.array([int(DEVICE_CATS.get(c, HOST_CATS.get(c, K.OTHER))) for c in cats] or [0], dtype=np.int8)
    cat_dev = np.array([c in DEVICE_CATS for c in cats] or [False], dtype=bool)
    kind = cat_kind[cat_codes].copy() if len(cat_codes) else np.empty(0, np.int8)
    is_device = cat_dev[cat_codes] if len(cat_codes) else np.empty(0, bool)
    matched = rules.match(names)
    comm_name = np.array([m is not None for m in matched] or [False], dtype=bool)[name_codes]
    step_name = _per_name(names, STEP_RE.match, name_codes)
    host_comm = _per_name(names, HOST_COMM_OP.match, name_codes)
    tk_wait = _per_name(names, lambda n: n.startswith("tracekit:wait|"), name_codes)
    tk_comm = _per_name(names, lambda n: n.startswith("tracekit:comm|"), name_codes)
    kernel = kind == K.KERNEL
    kind[kernel & (comm_name | has_coll)] = K.COMM
    annot = (kind == K.ANNOTATION) & ~is_device
    kind[annot & comm_name] = K.COMM  # gloo:* worker-thread spans
    kind[annot & step_name] = K.STEP
    kind[annot & tk_wait] = K.SYNC
    kind[annot & tk_comm] = K.CPU_COMM_OP
    kind[(kind == K.CPU_OP) & host_comm] = K.CPU_COMM_OP
    return kind, is_device


def assign_steps(cols, kind, names, name_codes, is_device) -> np.ndarray:
    """Host events take the ProfilerStep enclosing them; device work the step of the host call that
    launched it (launch -> kernel correlation)."""
    n = len(kind)
    step = np.full(n, ABSENT, dtype=np.int32)
    srows = np.flatnonzero(kind == K.STEP)
    if len(srows) == 0:
        return step
    numbers = np.array([int(STEP_RE.match(names[c]).group(1)) for c in name_codes[srows]], dtype=np.int32)
    order = np.argsort(cols["ts_ns"][srows], kind="stable")
    srows, numbers = srows[order], numbers[order]
    starts, ends = cols["ts_ns"][srows], cols["ts_ns"][srows] + cols["dur_ns"][srows]
    ts = cols["ts_ns"]
    idx = np.searchsorted(starts, ts, side="right") - 1
    inside = (idx >= 0) & (ts < ends[np.clip(idx, 0, None)])
    step = np.where(inside, numbers[np.clip(idx, 0, None)], ABSENT).astype(np.int32)
    step[srows] = numbers
    rt = np.flatnonzero((kind == K.RUNTIME) & (cols["correlation"] >= 0))
    dev = np.flatnonzero(is_device & (cols["correlation"] >= 0))
    if len(rt) and len(dev):
        rc = cols["correlation"][rt]
        o = np.argsort(rc, kind="stable")
        rc, rsteps = rc[o], step[rt][o]
        pos = np.clip(np.searchsorted(rc, cols["correlation"][dev]), 0, len(rc) - 1)
        hit = rc[pos] == cols["correlation"][dev]
        step[dev[hit]] = rsteps[pos[hit]]
    return step
