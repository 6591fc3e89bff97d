"""Per-rank loading is independent work: run it serially, on a local process pool, or on a Dask cluster."""

from __future__ import annotations

import itertools
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..errors import ConfigError, InputLimitError, TraceFormatError, TracekitError


def _load_one(job: tuple[Callable[[str, Any], Any], str, Any]) -> Any:
    """load_file in a worker. Whatever escapes it reaches the parent as a one-line TracekitError: a worker's
    RecursionError or MemoryError would otherwise be re-raised in the parent with the worker's traceback."""
    from .decode import too_deep

    load_file, path, options = job
    try:
        return load_file(path, options)
    except TracekitError:
        raise
    except RecursionError:
        raise TraceFormatError(too_deep(path)) from None
    except MemoryError:
        raise InputLimitError(
            f"{path}: out of memory while loading; lower --max-trace-bytes to refuse such files early"
        ) from None


def map_files(
    load_file: Callable[[str, Any], Any], files: list[str], options, *, executor=None, progress: bool | None = None
) -> list:
    """``load_file(path, options)`` over ``files`` (a module-level function, so that it pickles), results in the
    same order. TracekitErrors propagate unchanged."""
    jobs = [(load_file, f, options) for f in files]
    if executor is None:
        executor = "serial" if len(files) == 1 or (os.cpu_count() or 1) == 1 else "process"
    if isinstance(executor, str) and executor.startswith("dask://"):
        return _dask_map(jobs, executor[len("dask://") :])
    if _is_dask_client(executor):
        return _dask_map(jobs, executor)
    show = sys.stderr.isatty() if progress is None else progress
    if executor == "serial":
        return list(_progress(map(_load_one, jobs), len(jobs), show))
    if executor == "process":
        workers = min(len(files), os.cpu_count() or 1)
        try:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                return list(_progress(pool.map(_load_one, jobs), len(jobs), show))
        except BrokenProcessPool:
            raise TracekitError(
                f"a loader process died (killed, or out of memory) while loading {len(files)} "
                "traces; retry with --executor serial to see which file"
            ) from None
    if isinstance(executor, Executor):
        return list(_progress(executor.map(_load_one, jobs), len(jobs), show))
    raise ConfigError(f"--executor {executor!r}: expected 'serial', 'process' or 'dask://HOST:PORT'")


def map_pieces(fn: Callable[[Any], Any], jobs: list, workers: int) -> Iterator[Any]:
    """``fn`` over the pieces of one split trace on a local process pool, results in order as they come. At most
    ``workers + 1`` pieces are in flight (decoding, queued or done and not yet taken), so the caller, which takes
    each result and lets it go, holds a few pieces' columns at a time rather than every piece's. A worker's
    NotStreamable (the caller then loads serially) and TracekitErrors reach the caller unchanged."""
    try:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            todo = iter(jobs)
            flight = deque(pool.submit(_piece, (fn, job)) for job in itertools.islice(todo, workers + 1))
            while flight:
                result = flight.popleft().result()
                job = next(todo, None)
                if job is not None:
                    flight.append(pool.submit(_piece, (fn, job)))
                yield result
                del result
    except BrokenProcessPool:
        raise TracekitError(
            f"a loader process died (killed, or out of memory) while loading {jobs[0][0]} in "
            f"{len(jobs)} pieces; retry with --executor serial"
        ) from None


def _piece(job: tuple[Callable[[Any], Any], Any]) -> Any:
    from .decode import too_deep

    fn, arg = job
    try:
        return fn(arg)
    except RecursionError:
        raise TraceFormatError(too_deep(arg[0])) from None
    except MemoryError:
        raise InputLimitError(
            f"{arg[0]}: out of memory while loading; lower --max-trace-bytes to refuse such files early"
        ) from None


def _progress(iterator, total: int, show: bool):
    if not show or total < 2:
        yield from iterator
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("loading traces", total=total)
        for item in iterator:
            bar.advance(task)
            yield item


def _is_dask_client(obj) -> bool:
    return type(obj).__name__ == "Client" and type(obj).__module__.startswith("distributed")


def _dask_map(jobs, client_or_address):
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("the dask executor needs 'dask[distributed]': pip install 'tracekit[dask]'") from None
    client = client_or_address if _is_dask_client(client_or_address) else _connect(Client, client_or_address)
    try:
        futures = client.map(_load_one, jobs, pure=False)
        return client.gather(futures)
    finally:
        if client is not client_or_address:
            client.close()


def _connect(client_type, address: str):
    """A Client for ``address``; an address Dask cannot parse or reach is a usage error naming it, not Dask's
    traceback (ValueError, OSError after the connect timeout, an AssertionError for a port past 65535)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"--executor dask://{address}: expected dask://HOST:PORT with a port from 1 to 65535 (the scheduler's address)"
        )
    try:
        return client_type(address, timeout="10s")
    except (OSError, ValueError, TimeoutError, AssertionError) as exc:
        raise ConfigError(
            f"--executor dask://{address}: cannot reach the Dask scheduler ({exc}); start it or "
            "check the address, or use --executor process"
        ) from None
