"""A progress line while ranks run and traces load: rich's spinner with the elapsed time, on a terminal only
(stderr), so that CI logs, pipes and files get exactly the command's output and nothing else."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


def on_terminal() -> bool:
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


@contextlib.contextmanager
def progress(what: str) -> Iterator[None]:
    """``with progress("running 4 ranks"): ...`` shows ``⠋ running 4 ranks 0:00:03`` on stderr while the body
    runs, then clears it; does nothing when stderr is not a terminal."""
    if not on_terminal():
        yield
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=Console(stderr=True), transient=True
    ) as bar:
        bar.add_task(what, total=None)
        yield
