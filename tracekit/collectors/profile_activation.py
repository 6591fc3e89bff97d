"""The activation-memory side of ``tracekit.profile(..., activation_memory=True)``.

An :class:`~.activation.ActivationMemoryRecorder` runs for every step ``profile`` sees (``p.step()`` ends a step
of both). Peaks: on CUDA the recorder's own ``max_memory_allocated`` per step; on CPU the profiler's
``[memory]`` events (``profile_memory`` is switched on) of each recorded ``ProfilerStep#N``, so only steps
the profiler recorded carry a peak. The result goes to ``activation_r{rank}.json`` beside the traces, where
``tracekit analyze`` finds it (:mod:`tracekit.analyzers.memory.activation_run`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from ..formats.activation import file_name
from ..model.activation import peak_from_memory_events
from .activation import ActivationMemoryRecorder, _on_cuda

log = logging.getLogger("tracekit.profile")
PROFILER_STEP = "ProfilerStep#"


def activation_path(out_dir: Path, rank: int) -> Path:
    return Path(out_dir) / file_name(rank)


def step_peaks(prof) -> dict[int, int]:
    """{step number: peak bytes above the step's start} for the ``ProfilerStep#N`` windows a finished
    ``torch.profiler.profile(profile_memory=True)`` recorded."""
    events = prof.profiler.kineto_results.events()
    windows = sorted(
        (int(e.name()[len(PROFILER_STEP) :]), e.start_ns(), e.end_ns())
        for e in events
        if e.name().startswith(PROFILER_STEP) and e.name()[len(PROFILER_STEP) :].isdigit()
    )
    memory = [(e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]"]
    peaks = peak_from_memory_events(memory, [(a, b) for _, a, b in windows])
    return {step: peak for (step, _, _), peak in zip(windows, peaks)}


class ActivationSession:
    """Starts the recorder, collects the profiler's peaks as traces are exported, and writes the result.
    Every failure is a logged warning: the run being observed goes on."""

    def __init__(self, model: torch.nn.Module, layers, rank: int, out_dir: Path):
        self.rank, self.out_dir = rank, Path(out_dir)
        self.cuda = _on_cuda(model)
        self.peaks: dict[int, int] = {}
        self.recorder = ActivationMemoryRecorder(
            model, layers, rank=rank, peak="cuda" if self.cuda else "none", keep_tensors=False
        )
        self.path: Path | None = None

    @property
    def needs_profile_memory(self) -> bool:
        return not self.cuda

    def __enter__(self) -> ActivationSession:
        self.recorder.__enter__()
        return self

    def step(self) -> None:
        try:
            self.recorder.step()
        except Exception as err:
            log.warning("tracekit: rank %d: activation memory could not close a step: %s", self.rank, err)

    def collect_peaks(self, prof) -> None:
        if self.cuda:
            return
        try:
            self.peaks.update(step_peaks(prof))
        except Exception as err:
            log.warning("tracekit: rank %d: no peak memory from the profiler (%s)", self.rank, err)

    def close(self, *exc) -> None:
        try:
            self.recorder.__exit__(*exc)
            result = self.recorder.result()
            if not self.cuda:
                steps = tuple(s.with_peak(None, self.peaks.get(s.step)) for s in result.steps)
                result = type(result)(result.rank, steps, "profiler" if self.peaks else "none")
            self.path = result.save(activation_path(self.out_dir, self.rank))
        except Exception as err:
            log.warning("tracekit: rank %d could not record activation memory: %s", self.rank, err)
