"""PyTorch's Flight Recorder: turn it on, dump every rank's ring beside the traces, never break the run.

The recorder keeps each process's last collectives in a ring (``TORCH_FR_BUFFER_SIZE`` entries; on torch 2.13
gloo records into it by default, 2000 entries, and ``TORCH_FR_BUFFER_SIZE=0`` turns it off). A dump is
``torch._C._distributed_c10d._dump_fr_trace()`` (pickle) or ``_dump_fr_trace_json()``; tracekit writes it as
``<out_dir>/_dump_<rank>`` (``.json`` for the JSON form), the layout ``tracekit hang DIR`` and PyTorch's own
``torchfrtrace`` read. Stack frames are left out by default: symbolising them took seconds for 2000 entries
(docs/collectors.md), which a run that just failed should not pay.

Used by ``tracekit.profile(..., flight_recorder=True)`` and ``tracekit run --flight-recorder``; on its own::

    with tracekit.collectors.flight_recorder.recording("out/run1"):
        train()          # dumped at the end, and when train() raises (a collective timed out, say)
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("tracekit.flight_recorder")

BUFFER_ENV = "TORCH_FR_BUFFER_SIZE"
DEFAULT_ENTRIES = 2000
PREFIX = "_dump_"


def enable(entries: int = DEFAULT_ENTRIES) -> str | None:
    """Ask for a ring of ``entries`` unless the user set ``TORCH_FR_BUFFER_SIZE``; torch reads it when its first
    process group is created, so call this before ``init_process_group``. Returns a problem line, or None."""
    if os.environ.get(BUFFER_ENV, "").strip():
        if os.environ[BUFFER_ENV].strip() == "0":
            return f"{BUFFER_ENV}=0 turns the Flight Recorder off; no entries will be recorded"
        return None
    # torch reads it when the recorder is first used (the first process group): a job that created its groups
    # before keeps torch's default ring (2000 entries on torch 2.13), which is what is dumped then
    os.environ[BUFFER_ENV] = str(int(entries))
    return None


def dump_path(out_dir: str | os.PathLike, rank: int, form: str = "pickle") -> Path:
    return Path(out_dir) / f"{PREFIX}{rank}{'.json' if form == 'json' else ''}"


def dump(out_dir: str | os.PathLike, rank: int, *, form: str = "pickle", stacks: bool = False) -> tuple[Path | None, str | None]:
    """Write this process's ring to ``dump_path(out_dir, rank, form)`` (a partial file renamed into place).
    Returns (path, None), or (None, the problem) without raising: a collector never breaks the run it observes."""
    path = dump_path(out_dir, rank, form)
    partial = path.with_name(f".{path.name}.partial")
    try:
        data = _ring(form, stacks)
        if isinstance(data, str):
            data = data.encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, path)
        return path, None
    except Exception as err:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        return None, f"rank {rank}: could not dump the Flight Recorder to {path}: {err}"


def _ring(form: str, stacks: bool) -> bytes | str:
    """The dump of this process's ring: NCCL's own recorder on an NCCL run, the generic one (gloo) otherwise."""
    import torch.distributed as dist
    from torch._C import _distributed_c10d as c10d

    nccl = dist.is_available() and dist.is_initialized() and dist.get_backend() == "nccl"
    kind = "nccl" if nccl and hasattr(c10d, "_dump_nccl_trace") else "fr"
    if form == "json":
        return getattr(c10d, f"_dump_{kind}_trace_json")()
    return getattr(c10d, f"_dump_{kind}_trace")(includeStackTraces=stacks)


@contextlib.contextmanager
def recording(
    out_dir: str | os.PathLike, rank: int | None = None, *, form: str = "pickle", stacks: bool = False
) -> Iterator[None]:
    """Dump at the end of the block and when it raises (the exception still propagates)."""
    problem = enable()
    if problem:
        log.warning("tracekit: %s", problem)
    try:
        yield
    finally:
        where = rank if rank is not None else _rank()
        _, problem = dump(out_dir, where, form=form, stacks=stacks)
        if problem:
            log.warning("tracekit: %s", problem)


def _rank() -> int:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:
        pass
    return int(os.environ.get("RANK", 0))
