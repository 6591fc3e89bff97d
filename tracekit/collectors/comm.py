"""Annotated collectives: every collective tracekit issues carries its metadata in a ``record_function`` name.

gloo emits no ``record_param_comms``, so a CPU trace would not say which group, how many bytes or which
instance a ``gloo:<op>`` span belongs to. Each call here wraps the issuing call in
``record_function(CommAnnotation(...).format())`` and returns a :class:`Work` whose ``wait()`` is wrapped in the
matching ``tracekit:wait|...`` annotation. Sequence numbers count per process group from 0, in issue order,
so every rank of a group numbers the same instance alike.

:func:`annotate` is the public wrapper for users' own collectives::

    with tracekit.collectors.comm.annotate("all_reduce", t, t, group) as ann:
        work = dist.all_reduce(t, group=group, async_op=True)
    annotated_wait(work, ann)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist
from torch.profiler import record_function

from ..formats.comm_annotation import CommAnnotation

_lock = threading.Lock()
_seq: dict[str, int] = {}
_stats: dict[tuple[str, str], list[int]] = {}  # (group desc, op) -> [count, input bytes]


def group_name(group) -> str:
    """The name dist gave ``group`` (``pg_name`` in Kineto's ``distributedInfo``)."""
    group = group or dist.group.WORLD
    try:
        return dist.distributed_c10d._get_process_group_name(group)
    except Exception:
        return str(getattr(group, "group_name", ""))


def group_desc(group) -> str:
    group = group or dist.group.WORLD
    return str(getattr(group, "group_desc", "") or "")


def group_ranks(group) -> list[int]:
    return sorted(dist.get_process_group_ranks(group or dist.group.WORLD))


def next_seq(name: str) -> int:
    with _lock:
        seq = _seq.get(name, 0)
        _seq[name] = seq + 1
        return seq


def reset_sequences() -> None:
    """Forget the per-group counters (a new world: tests that re-initialise dist in one process)."""
    with _lock:
        _seq.clear()
        _stats.clear()


def stats() -> dict[tuple[str, str], tuple[int, int]]:
    """Collectives issued by this process so far: (group desc, op) -> (count, input bytes)."""
    with _lock:
        return {k: (v[0], v[1]) for k, v in _stats.items()}


def _nelems(t) -> int:
    if t is None:
        return -1
    if isinstance(t, (list, tuple)):
        return sum(x.numel() for x in t)
    return t.numel()


def _nbytes(t) -> int:
    if t is None:
        return -1
    if isinstance(t, (list, tuple)):
        return sum(x.numel() * x.element_size() for x in t)
    return t.numel() * t.element_size()


def make_annotation(
    op: str,
    inp,
    out,
    group,
    *,
    src: int = -1,
    dst: int = -1,
    in_split: Sequence[int] | None = None,
    out_split: Sequence[int] | None = None,
) -> CommAnnotation:
    """The annotation of one new collective instance on ``group`` (takes the group's next sequence number)."""
    name = group_name(group)
    ref = inp if inp is not None else out
    if isinstance(ref, (list, tuple)):
        ref = ref[0]
    return CommAnnotation(
        op=op,
        pg_name=name,
        pg_desc=group_desc(group),
        ranks=",".join(map(str, group_ranks(group))),
        dtype=str(ref.dtype).removeprefix("torch.") if ref is not None else "",
        in_nelems=_nelems(inp),
        out_nelems=_nelems(out),
        in_bytes=_nbytes(inp),
        out_bytes=_nbytes(out),
        seq=next_seq(name),
        src_rank=src,
        dst_rank=dst,
        in_split=",".join(map(str, in_split)) if in_split is not None else "",
        out_split=",".join(map(str, out_split)) if out_split is not None else "",
    )


@contextlib.contextmanager
def annotate(op: str, inp, out, group, **kwargs) -> Iterator[CommAnnotation]:
    """Wrap the call that issues a collective: ``with annotate("all_reduce", t, t, g): dist.all_reduce(...)``."""
    ann = make_annotation(op, inp, out, group, **kwargs)
    with _lock:
        entry = _stats.setdefault((ann.pg_desc, op), [0, 0])
        entry[0] += 1
        entry[1] += max(ann.in_bytes, 0)
    with record_function(ann.format()):
        yield ann


def annotated_wait(work, ann: CommAnnotation) -> None:
    """``work.wait()`` inside a ``tracekit:wait|...`` annotation (the time the host is blocked)."""
    if work is None:
        return
    with record_function(CommAnnotation(op=ann.op, pg_name=ann.pg_name, seq=ann.seq, is_wait=True).format()):
        work.wait()


class Work:
    """A collective in flight; ``wait()`` is annotated and idempotent. Synchronous calls return a done Work."""

    __slots__ = ("_work", "annotation", "_done")

    def __init__(self, work, annotation: CommAnnotation):
        self._work, self.annotation, self._done = work, annotation, work is None

    def wait(self) -> None:
        if not self._done:
            annotated_wait(self._work, self.annotation)
            self._done = True


def _run(op: str, inp, out, group, async_op: bool, issue, **kwargs) -> Work:
    with annotate(op, inp, out, group, **kwargs) as ann:
        work = issue()
    result = Work(work, ann)
    if not async_op:
        result.wait()
    return result


_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def all_reduce(t: torch.Tensor, group, async_op: bool = False) -> Work:
    return _run("all_reduce", t, t, group, async_op, lambda: dist.all_reduce(t, group=group, async_op=True))


def all_gather(out: torch.Tensor, inp: torch.Tensor, group, async_op: bool = False) -> Work:
    """All-gather along dim 0 into ``out`` (``world`` times ``inp`` stacked)."""
    return _run("all_gather", inp, out, group, async_op, lambda: _all_gather(out, inp.contiguous(), group=group, async_op=True))


def reduce_scatter(out: torch.Tensor, inp: torch.Tensor, group, async_op: bool = False) -> Work:
    """Reduce-scatter (sum) of ``inp`` along dim 0 into ``out``."""
    return _run(
        "reduce_scatter", inp, out, group, async_op, lambda: _reduce_scatter(out, inp.contiguous(), group=group, async_op=True)
    )


def all_to_all(
    out: torch.Tensor,
    inp: torch.Tensor,
    group,
    async_op: bool = False,
    out_split: Sequence[int] | None = None,
    in_split: Sequence[int] | None = None,
) -> Work:
    """``all_to_all_single`` along dim 0, with optional split sizes (rows per peer)."""
    kwargs = {}
    if in_split is not None or out_split is not None:
        kwargs = {"in_split": in_split, "out_split": out_split}
    return _run(
        "all_to_all",
        inp,
        out,
        group,
        async_op,
        lambda: dist.all_to_all_single(
            out,
            inp.contiguous(),
            list(out_split) if out_split else None,
            list(in_split) if in_split else None,
            group=group,
            async_op=True,
        ),
        **kwargs,
    )


def ring_shift(out: torch.Tensor, inp: torch.Tensor, group, async_op: bool = False, reverse: bool = False) -> Work:
    """Send ``inp`` to the next rank of ``group`` and receive the previous rank's into ``out`` (``reverse``: the
    other way). Annotated as op ``send_recv`` (busbw factor 1) with src/dst. Written as an ``all_to_all_single``
    with zero splits to every other peer so that gloo runs it on its worker thread and the trace shows the
    transfer (``gloo:send``/``gloo:recv`` do not)."""
    size, me = dist.get_world_size(group), dist.get_rank(group)
    dst, src = ((me - 1) % size, (me + 1) % size) if reverse else ((me + 1) % size, (me - 1) % size)
    rows = inp.shape[0]
    in_split = [rows if r == dst else 0 for r in range(size)]
    out_split = [rows if r == src else 0 for r in range(size)]
    ranks = dist.get_process_group_ranks(group)
    return _run(
        "send_recv",
        inp,
        out,
        group,
        async_op,
        lambda: dist.all_to_all_single(out, inp.contiguous(), out_split, in_split, group=group, async_op=True),
        src=ranks[src],
        dst=ranks[dst],
        in_split=in_split,
        out_split=out_split,
    )
