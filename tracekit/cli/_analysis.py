"""Shared by `analyze`, `report` and `annotate`: load traces and analyse them."""

from __future__ import annotations

import os
from collections.abc import Sequence

import click

from .common import build_load_options, load_options


def allow_partial_option(f):
    """--allow-partial (`analyze`, `report`): a run without a whole step is shown instead of refused."""
    return click.option(
        "--allow-partial",
        is_flag=True,
        help="When no step is whole (a truncated trace), show the partial steps instead of exit 3: their figures "
        "are marked partial and kept out of every total, as the gate does.",
    )(f)


def analysis_options(f):
    """The loader options plus --dim-map, --no-align-clocks, --window and --instance."""
    f = click.option(
        "--instance",
        type=click.IntRange(0),
        default=None,
        metavar="K",
        help="With --window: analyse only the K-th instance of the annotation (0 is the first; instances nested in "
        "another are counted, as HTA's instance_id), instead of every outermost instance.",
    )(f)
    f = window_option(f)
    f = click.option(
        "--critical-path",
        is_flag=True,
        help="Also find each step's critical path over all ranks (the summary's critical_path section; "
        "costs about as much as the analysis).",
    )(f)
    f = click.option(
        "--memory-points",
        type=click.IntRange(3, 10**7),
        default=1000,
        show_default=True,
        help="Points of each device's memory timeline kept in the summary (the maximum and the last "
        "of each bucket, so the peaks stay).",
    )(f)
    f = click.option("--no-align-clocks", is_flag=True, help="Do not correct clock offsets between ranks.")(f)
    f = click.option(
        "--dim-map",
        multiple=True,
        metavar="PATTERN=DIM",
        help="Process group (desc or name, shell pattern) -> parallel dimension (repeatable).",
    )(f)
    return load_options(f)


def window_option(f):
    """--window NAME: the instances of a user annotation are the steps (exact name or shell glob)."""
    return click.option(
        "--window",
        default=None,
        metavar="NAME",
        help="Take the instances of this annotation (record_function name, exact or glob) as the "
        "steps instead of ProfilerStep#N, for traces recorded without a profiler schedule.",
    )(f)


def analysis_from_traces(
    paths: Sequence[str],
    *,
    dim_map=(),
    no_align_clocks: bool = False,
    executor=None,
    window: str | None = None,
    instance: int | None = None,
    critical_path: bool = False,
    memory_points: int = 1000,
    allow_partial: bool = False,
    **load_kw,
):
    """The traces loaded and analysed, each rank's own analyses where it loads (``tracekit.analyzers.files``): the
    Analysis object (``to_dict()``, ``timeline()``, ``annotation(rank)``)."""
    from ..analyzers.files import analyze_files

    if instance is not None and window is None:
        raise click.UsageError("--instance K takes the K-th instance of the --window annotation: give --window NAME too")

    compact_arrow_pool()
    return analyze_files(
        [str(p) for p in paths],
        options=build_load_options(**load_kw),
        executor=executor,
        dim_map=dim_map,
        align_clocks=not no_align_clocks,
        window=window,
        instance=instance,
        critical_path=critical_path,
        memory_points=memory_points,
        allow_empty=allow_partial,
    )


def compact_arrow_pool() -> None:
    """Arrow's buffers (pandas' str columns) from jemalloc where pyarrow has it: with mimalloc, Arrow's default,
    the analysis kept ~60 MB of freed buffers resident per million events (docs/performance.md). A command-line
    process only: a library user's Arrow pool is theirs; ARROW_DEFAULT_MEMORY_POOL, when set, wins."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    import pyarrow as pa

    if "jemalloc" in pa.supported_memory_backends():
        pa.set_memory_pool(pa.jemalloc_memory_pool())
