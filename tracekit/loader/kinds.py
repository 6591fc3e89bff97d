"""Event kinds from evidence -- each event's own category and where it ran (device pids) -- for every
Kineto generation, and each event's ProfilerStep."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..model.events import ABSENT
from ..model.events import EventKind as K
from .classify import HOST_COMM_OP, RuleSet

DEVICE, HOST = "device", "host"


@dataclass(frozen=True, slots=True)
class Category:
    """What an event category means: its kind, where it runs, and the trace generation that writes it."""

    cat: str
    kind: K
    place: str  # DEVICE or HOST
    generation: str


# The category table: data, each generation it covers named beside it.
CATEGORIES: tuple[Category, ...] = (
    # Kineto since PyTorch ~1.11 (CUDA and ROCm)
    Category("kernel", K.KERNEL, DEVICE, "kineto"),
    Category("gpu_memcpy", K.MEMCPY, DEVICE, "kineto"),
    Category("gpu_memset", K.MEMSET, DEVICE, "kineto"),
    Category("cuda_sync", K.SYNC, DEVICE, "kineto"),
    Category("gpu_user_annotation", K.ANNOTATION, DEVICE, "kineto"),
    Category("cpu_op", K.CPU_OP, HOST, "kineto"),
    Category("user_annotation", K.ANNOTATION, HOST, "kineto"),
    Category("cuda_runtime", K.RUNTIME, HOST, "kineto"),
    Category("cuda_driver", K.RUNTIME, HOST, "kineto"),
    Category("cpu_instant_event", K.MEMORY, HOST, "kineto"),
    Category("python_function", K.OTHER, HOST, "kineto"),
    # PyTorch ~1.8-1.10 (flow category async_gpu)
    Category("Kernel", K.KERNEL, DEVICE, "kineto-1.8"),
    Category("Memcpy", K.MEMCPY, DEVICE, "kineto-1.8"),
    Category("Memset", K.MEMSET, DEVICE, "kineto-1.8"),
    Category("Runtime", K.RUNTIME, HOST, "kineto-1.8"),
    Category("Operator", K.CPU_OP, HOST, "kineto-1.8"),  # every host event of 1.8, ProfilerStep#N included
    # CUPTI range-profiler mode: one event per profiled range (a kernel replayed for its counters)
    Category("cuda_profiler_range", K.KERNEL, DEVICE, "cupti-range-profiler"),
    # Meta MTIA: device work on the MTIA process ("MTIA <n>" pids), the runtime on the host
    Category("mtia_ccp_events", K.KERNEL, DEVICE, "mtia"),
    Category("mtia_runtime", K.RUNTIME, HOST, "mtia"),
    # Intel XPU (Kineto's XPUPTI plugin, PyTorch >= 2.4): kernels, copies and fills in the kineto device
    # categories on the device pid; the launches (urEnqueueKernelLaunch, ...) and Level Zero calls on the host,
    # carrying the correlation id the kernel carries
    Category("xpu_runtime", K.RUNTIME, HOST, "xpu"),
    Category("xpu_driver", K.RUNTIME, HOST, "xpu"),
    # An out-of-tree accelerator behind PyTorch's PrivateUse1 backend (Kineto's PRIVATEUSE1_RUNTIME/_DRIVER)
    Category("privateuse1_runtime", K.RUNTIME, HOST, "privateuse1"),
    Category("privateuse1_driver", K.RUNTIME, HOST, "privateuse1"),
    # Vendor forks of Kineto that renamed the CUDA categories: Moore Threads MUSA (MooreThreads/kineto) and
    # Cambricon MLU; their kernels stay in "kernel"
    Category("musa_runtime", K.RUNTIME, HOST, "musa"),
    Category("musa_driver", K.RUNTIME, HOST, "musa"),
    Category("musa_sync", K.SYNC, DEVICE, "musa"),
    Category("musa_profiler_range", K.KERNEL, DEVICE, "musa"),
    Category("mlu_runtime", K.RUNTIME, HOST, "mlu"),
    Category("mlu_memcpy", K.MEMCPY, DEVICE, "mlu"),
    Category("mlu_memset", K.MEMSET, DEVICE, "mlu"),
    Category("mlu_user_annotation", K.ANNOTATION, DEVICE, "mlu"),
)
BY_CAT = {c.cat: c for c in CATEGORIES}
DEVICE_CATS = {c.cat for c in CATEGORIES if c.place == DEVICE}
HOST_CATS = {c.cat for c in CATEGORIES if c.place == HOST}
MEMCPY_CATS = {c.cat for c in CATEGORIES if c.kind in (K.MEMCPY, K.MEMSET)}  # their args carry "bytes"
# Categories only a host thread writes: a pid with one of them is an OS process, never a device. MTIA's runtime
# is left out: the device writes its own synchronize records in that category.
HOST_PID_CATS = frozenset(c.cat for c in CATEGORIES if c.kind in (K.CPU_OP, K.RUNTIME) and c.generation != "mtia")
# The accelerator a trace's categories name, where they name one other than CUDA/ROCm (told apart elsewhere)
PLATFORM_OF_GENERATION = {"mtia": "mtia", "xpu": "xpu", "privateuse1": "privateuse1", "musa": "musa", "mlu": "mlu"}

# Device events of a category whose name says they are a copy or a sync, not compute (MTIA's DMA requests and
# event records/waits, as HTA's MTIA memory pattern ^dma).
DEVICE_NAME_KINDS: tuple[tuple[str, re.Pattern, K], ...] = (
    ("mtia_ccp_events", re.compile(r"^dma"), K.MEMCPY),
    ("mtia_ccp_events", re.compile(r"^event_(record|wait)"), K.SYNC),
)
STEP_RE = re.compile(r"^ProfilerStep#([0-9]+)$")  # ASCII digits: "٥٥١" is not a step number PyTorch writes
_INVISIBLE = re.compile(r"[\s\u00ad\u0600-\u0605\u061c\u06dd\u070f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]")
_STEP_LIKE = re.compile(r"profiler\W*step", re.IGNORECASE)


def normalise_step_names(names: list[str]) -> tuple[list[str], list[str]]:
    """The unique names with each one that is ``ProfilerStep#N`` once invisible characters are taken out (NFKC, then
    every space and format character removed: ``ProfilerStep#\u200b551``, a ZWJ, an NBSP, fullwidth digits) written
    as that; and what to say: how many were normalised, and the names that look like ``ProfilerStep#N`` but are not
    (``ProfilerStep#55l``), which are not read as steps. Before, such a step was ignored without a word and the
    whole trace became one window."""
    import unicodedata

    fixed: list[tuple[str, str]] = []
    lookalike: list[str] = []
    out = list(names)
    for i, name in enumerate(names):
        if not isinstance(name, str) or STEP_RE.match(name):
            continue
        head = name if len(name) <= 256 else name[:256]  # a step name is short: only a long one's start can look like one
        if head.isascii():  # the common case, and cheap: an ASCII name can only hide a step behind spaces
            low = head.lower()
            if "step" not in low and "profiler" not in low:
                continue
            clean = _INVISIBLE.sub("", head)
        else:
            clean = _INVISIBLE.sub("", unicodedata.normalize("NFKC", head))
        if "step" not in clean.lower():
            continue
        if head is name and STEP_RE.match(clean):
            fixed.append((name, clean))
            out[i] = clean
        elif _STEP_LIKE.search(clean):
            lookalike.append(name)
    notes = []
    if fixed:
        shown = ", ".join(f"{a!r} -> {b!r}" for a, b in fixed[:3])
        notes.append(
            f"{len(fixed)} step names held invisible or look-alike characters ({shown}{' ...' if len(fixed) > 3 else ''}); "
            "read as the ProfilerStep#N they spell"
        )
    if lookalike:
        shown = ", ".join(repr(n[:60]) for n in lookalike[:3])
        notes.append(
            f"{len(lookalike)} names look like a ProfilerStep#N but are not one ({shown}{' ...' if len(lookalike) > 3 else ''}); "
            "they are not read as steps"
        )
    return out, notes


_THREAD_RE = re.compile(r"^(?:stream )?(\d{1,18})$")


def thread_ids(tids: Sequence) -> np.ndarray:
    """The ``tid`` column (a device event's stream, a host event's thread). PyTorch ~1.8-1.10 wrote tids as
    strings: ``"stream 7"`` on the device pid, ``"456"`` on the host; those read as their number, so that the
    host threads stay apart and a kernel keeps its stream (before, every string tid read as absent: all host
    threads one thread, every stream -1). Other strings (a thread's name) stay absent (-1)."""
    try:
        return np.array(tids, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([_thread_id(t) for t in tids], dtype=np.int64)


def _thread_id(t) -> int:
    if isinstance(t, str) and (m := _THREAD_RE.match(t.strip())):
        return int(m.group(1))
    return int_or_absent(t)


def int_or_absent(v) -> int:
    """An int64 cell: an int or a finite float within ±2**62, else absent (-1): None, strings, bools, huge values."""
    if type(v) is int:
        return v if -(2**62) < v < 2**62 else ABSENT
    if type(v) is float and v == v and abs(v) < 2**62:
        return int(v)
    return ABSENT


def _per_name(names: Sequence[str], test, codes: np.ndarray) -> np.ndarray:
    return np.array([bool(test(n)) for n in names] or [False], dtype=bool)[codes]


def device_pids(pid: np.ndarray, cat_codes: np.ndarray, cats: Sequence[str]) -> np.ndarray:
    """The pids device work runs on: those of events in device categories, less those with host operators
    (a host pid is the OS process id; Kineto's device pids are the device ordinals)."""
    codes, uniques = _pid_codes(pid)
    return np.sort(uniques[_device_pid_codes(codes, len(uniques), cat_codes, cats)])


def _pid_codes(pid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, distinct pids): a hash pass (a trace has a handful of pids), not a sort of every row."""
    import pandas as pd

    codes, uniques = pd.factorize(pid)
    return codes, np.asarray(uniques)


def _device_pid_codes(codes: np.ndarray, n: int, cat_codes: np.ndarray, cats: Sequence[str]) -> np.ndarray:
    dev_cat = np.array([c in DEVICE_CATS for c in cats] or [False], dtype=bool)[cat_codes]
    host_cat = np.array([c in HOST_PID_CATS for c in cats] or [False], dtype=bool)[cat_codes]
    return (np.bincount(codes[dev_cat], minlength=n) > 0) & (np.bincount(codes[host_cat], minlength=n) == 0)


def classify_kinds(
    cat_codes: np.ndarray,
    cats: Sequence[str],
    name_codes: np.ndarray,
    names: Sequence[str],
    rules: RuleSet,
    has_coll: np.ndarray,
    pid: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(kind, is_device) per row. Rules run on the unique names only.

    Device or host: the category's place, and a host-category event (a runtime call) on a device pid is the
    device's own record (MTIA's device-side ``synchronize``): a device SYNC. Communication on the device: a
    kernel with collective metadata, or one a name rule recognises (launch context comes later, in linking).
    A host annotation is never device communication: it is the host side of a collective (CPU_COMM_OP),
    except on CPU-only runs, where gloo's worker-thread spans are the communication intervals."""
    cat_kind = np.array([int(BY_CAT[c].kind) if c in BY_CAT else int(K.OTHER) for c in cats] or [0], dtype=np.int8)
    cat_dev = np.array([c in DEVICE_CATS for c in cats] or [False], dtype=bool)
    kind = cat_kind[cat_codes].copy() if len(cat_codes) else np.empty(0, np.int8)
    is_device = cat_dev[cat_codes] if len(cat_codes) else np.empty(0, bool)
    if pid is not None and len(pid):
        codes, uniques = _pid_codes(pid)
        on_dev = _device_pid_codes(codes, len(uniques), cat_codes, cats)[codes] & ~is_device
        kind[on_dev & (kind == K.RUNTIME)] = K.SYNC
        is_device = is_device | on_dev
    for cat, pattern, k in DEVICE_NAME_KINDS:
        if cat in cats:
            hit = _per_name(names, pattern.match, name_codes) & (cat_codes == list(cats).index(cat))
            kind[hit] = k
    matched = rules.match(names)
    comm_name = np.array([m is not None for m in matched] or [False], dtype=bool)[name_codes]
    step_name = _per_name(names, STEP_RE.match, name_codes)
    host_comm = _per_name(names, HOST_COMM_OP.match, name_codes)
    tk_wait = _per_name(names, lambda n: n.startswith("tracekit:wait|"), name_codes)
    tk_comm = _per_name(names, lambda n: n.startswith("tracekit:comm|"), name_codes)
    kernel = kind == K.KERNEL
    kind[kernel & is_device & (comm_name | has_coll)] = K.COMM
    cpu_run = not bool(is_device.any())
    annot = (kind == K.ANNOTATION) & ~is_device
    if cpu_run:
        kind[annot & comm_name] = K.COMM  # gloo:* worker-thread spans
    kind[(annot | ((kind == K.CPU_OP) & ~is_device)) & step_name] = K.STEP  # 1.8 wrote steps as "Operator"
    kind[annot & tk_wait] = K.SYNC
    kind[annot & tk_comm] = K.CPU_COMM_OP
    kind[annot & host_comm & (kind == K.ANNOTATION)] = K.CPU_COMM_OP  # nccl:all_reduce, hccl:allgather, ...
    kind[(kind == K.CPU_OP) & host_comm] = K.CPU_COMM_OP
    return kind, is_device


def generation_of(cats: Iterable[str]) -> str:
    """The category generation(s) a trace was written in, from the categories it uses."""
    seen = sorted({BY_CAT[c].generation for c in cats if c in BY_CAT and BY_CAT[c].generation != "kineto"})
    if not seen:
        return "kineto" if any(c in BY_CAT for c in cats) else "unknown"
    return "+".join(seen)


def assign_steps(cols, kind, names, name_codes, is_device) -> np.ndarray:
    """Host events take the ProfilerStep enclosing them; device work the step of the host call that
    launched it (launch -> kernel correlation)."""
    srows = np.flatnonzero(kind == K.STEP)
    numbers = np.array([int(STEP_RE.sub(r"\1", names[c])) for c in name_codes[srows]], dtype=np.int32)
    return steps_of_windows(cols, kind, srows, numbers, is_device)


def steps_of_windows(cols, kind, srows: np.ndarray, numbers: np.ndarray, is_device) -> np.ndarray:
    """The step of every row, given the step windows (rows ``srows``, numbered ``numbers``): a host event takes the
    window enclosing it, device work the step of the launch its correlation id names."""
    n = len(kind)
    step = np.full(n, ABSENT, dtype=np.int32)
    if len(srows) == 0:
        return step
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
