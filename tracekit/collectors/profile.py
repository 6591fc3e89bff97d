"""``tracekit.profile``: torch.profiler with one trace per rank, a run manifest, and no way to break the run.

    with tracekit.profile("out/run1", wait=1, warmup=1, active=3) as p:
        for batch in loader:
            train_step(batch)
            p.step()

Writes ``rank{R}.trace.json.gz`` for every profiled rank (cycles after the first of ``repeat`` go to
``cycle{N}/rank{R}.trace.json.gz``) and, from rank 0, ``run.json`` (see :mod:`tracekit.collectors.manifest`).
Faults never break the training loop; each is a logged warning and a line in ``.problems``: an export failure
(full disk, unwritable directory, an exception inside the profiler), a trace found incomplete after writing
(a partial file never takes the trace's name), and a profiler already running in the process (tracekit then
records nothing rather than stop the other one). Misuse is reported the same way and ignored: ``step()`` outside
the block, an invalid schedule, a run with no ``step()`` or none recorded; the user's own exception always
propagates unchanged. The wall time of
profiled and unprofiled steps is measured and reported as the profiler's overhead per step.

Activation memory::

    with tracekit.profile("out/run1", activation_memory=True, model=net, layers="layers",
                          model_dims={"seq": 2048, "batch": 1, "hidden": 4096, "heads": 32, "tp": 8,
                                      "sp": True, "dtype": "bf16", "dropout": 0.1}) as p:

records the bytes each layer of ``net`` saves for backward in every step (``layers``: a ModuleList's name,
modules, or {index: module}; default: ``net``'s top-level children) and the peak memory per step, and writes
``activation_r{rank}.json`` beside the traces (see :mod:`.profile_activation`). ``model_dims`` goes to
``run.json`` as its ``model`` dict; with seq, batch (per rank's micro-batch), hidden and heads there,
``tracekit analyze`` compares each layer with the Korthikanti et al. model (tp/cp/sp may also come from
``layout``). For compatibility ``model=`` given a mapping is taken as ``model_dims``.

``flight_recorder=True`` (or ``"json"``) also dumps PyTorch's Flight Recorder ring of this rank's collectives to
``_dump_{rank}`` (``.json``) beside the traces when the block ends, normally or by an exception (a collective that
timed out): what ``tracekit hang`` and ``tracekit analyze`` read (see :mod:`.flight_recorder`). With ``ranks=[]``
nothing is profiled and only the ring is dumped: no profiler cost.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch.profiler import ProfilerAction, ProfilerActivity

from ..model.layout import LayoutError, ParallelLayout
from . import flight_recorder as flight_recorder_mod
from . import manifest as manifest_mod
from .profile_activation import ActivationSession

log = logging.getLogger("tracekit.profile")


@dataclass(frozen=True, slots=True)
class ProfileOverhead:
    """Step wall times with and without the profiler recording, and the time spent exporting."""

    rank: int
    steps: int
    unprofiled_steps: int
    profiled_steps: int
    unprofiled_step_ns: int  # mean over unprofiled steps before recording, the first excluded
    profiled_step_ns: int  # mean over recorded steps
    overhead_per_step_ns: int  # profiled - unprofiled (-1 when either is missing)
    profiler_calls_ns: int  # total time inside the profiler's step()/exit: start, stop, collection, export
    export_ns: int  # of which writing the trace files

    def to_dict(self) -> dict:
        return asdict(self)


def _rank_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class profile:
    """Context manager; call ``.step()`` once per training step. See the module docstring."""

    def __init__(
        self,
        out_dir,
        *,
        wait: int = 1,
        warmup: int = 1,
        active: int = 3,
        repeat: int = 1,
        record_shapes: bool = True,
        profile_memory: bool = False,
        with_stack: bool = False,
        ranks=None,
        layout=None,
        activation_memory: bool = False,
        model: torch.nn.Module | Mapping | None = None,
        layers=None,
        model_dims: Mapping | None = None,
        groups: list[dict] | None = None,
        workload: str | None = None,
        flight_recorder: bool | str = False,
    ):
        self.out_dir = Path(out_dir)
        self.rank, self.world_size = _rank_world()
        self.ranks = None if ranks is None else sorted(int(r) for r in ranks)
        self.enabled = self.ranks is None or self.rank in self.ranks
        self.schedule_args = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        self.problems: list[str] = []  # every fault met, one line each (also logged as a warning)
        self._schedule = self._checked_schedule()
        if self._schedule is None:
            self.enabled = False
        self._opts: dict[str, Any] = {"record_shapes": record_shapes, "profile_memory": profile_memory, "with_stack": with_stack}
        if isinstance(model, Mapping):
            model_dims = {**dict(model), **(model_dims or {})}
            model = None
        self.layout, self.model, self.layers, self.groups = layout, model, layers, groups
        self.model_dims = dict(model_dims) if model_dims is not None else None
        self.activation_memory = activation_memory
        self.workload = workload  # a name for the run manifest: `tracekit check` compares like with like
        self.activation: ActivationSession | None = None
        # True or "pickle" / "json": the Flight Recorder's ring dumped beside the traces, at the end and on a failure
        self.flight_recorder = "pickle" if flight_recorder is True else flight_recorder or None
        self.flight_dump: Path | None = None
        self.trace_paths: list[Path] = []
        self.overhead: ProfileOverhead | None = None
        self._prof: Any = None
        self._cycle = 0
        self._step_times: list[tuple[int, int]] = []  # (step index, wall ns) per completed step
        self._export_ns = 0
        self._calls_ns = 0
        self._manifest: dict = {}
        self._inside = False  # between __enter__ and __exit__: only then does step() drive the profiler
        self._step = 0
        self._t_step = 0
        self._outside_reported = False

    def _report(self, message: str) -> None:
        self.problems.append(message)
        log.warning("tracekit: %s", message)

    def _checked_schedule(self):
        """torch's schedule, or None (reported) for one it rejects: a bad schedule must not raise in the user's
        training script."""
        try:
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in self.schedule_args.values()):
                raise TypeError("every value must be an int")
            return torch.profiler.schedule(**self.schedule_args)
        except (AssertionError, TypeError, ValueError) as err:
            args = ", ".join(f"{k}={v!r}" for k, v in self.schedule_args.items())
            self._report(
                f"rank {self.rank}: invalid profiler schedule ({args}): {err or 'rejected by torch.profiler'}; "
                "nothing is recorded (wait, warmup, repeat >= 0 and active >= 1)"
            )
            return None

    # -- context manager ------------------------------------------------------------------------------------
    def __enter__(self) -> profile:
        self._inside, self._step, self._cycle, self._step_times = True, 0, 0, []
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._report(f"cannot create {self.out_dir} ({exc}); traces will not be written")
        if self.enabled and _profiler_running():
            self._report(
                f"rank {self.rank}: another profiler is already running in this process; tracekit records "
                "nothing rather than stop it (finish the other profiler first)"
            )
            self.enabled = False
        if self.rank == 0:
            self._write_manifest()
        if self.flight_recorder:
            self._start_flight_recorder()
        if self.enabled:
            self._start_activation()
            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            try:
                prof = torch.profiler.profile(
                    activities=activities, schedule=self._schedule, on_trace_ready=self._export, **self._opts
                )
                prof.__enter__()
                self._prof = prof
                _ACTIVE.add(id(self))
            except Exception as err:
                self._report(f"rank {self.rank}: the profiler could not start ({err}); nothing is recorded")
        self._step = 0
        self._t_step = time.perf_counter_ns()
        return self

    def step(self) -> None:
        if not self._inside:
            if not self._outside_reported:  # once: a loop calling it after the block would flood the log
                self._outside_reported = True
                self._report(f"rank {self.rank}: step() called outside `with tracekit.profile(...)`; ignored")
            return
        now = time.perf_counter_ns()
        self._step_times.append((self._step, now - self._t_step))
        self._step += 1
        if self.activation is not None:
            self.activation.step()
        if self._prof is not None:
            try:
                self._prof.step()
            except Exception as err:
                self._report(
                    f"rank {self.rank}: the profiler failed at step {self._step} ({err}); profiling stops, training continues"
                )
                self._stop_quietly()
        # Time inside the profiler's step() (trace start/stop, event collection, export) is counted apart: it is
        # paid once per cycle boundary, not on every recorded step.
        self._t_step = time.perf_counter_ns()
        self._calls_ns += self._t_step - now

    def __exit__(self, *exc) -> Literal[False]:
        """Stops and exports; never raises, and never replaces the user's exception (always returns False)."""
        self._inside = False
        if self._prof is not None:
            # kept referenced (step() after exit is guarded by _inside): freeing the torch profiler earlier than the
            # interpreter's exit made the in-flight gloo abort more frequent (docs/collectors.md)
            prof = self._prof
            t0 = time.perf_counter_ns()
            try:
                prof.__exit__(*exc)
            except Exception as err:
                self._report(f"rank {self.rank}: profiler stop failed: {err}")
            _ACTIVE.discard(id(self))
            # Collect the garbage cycles left by the run now, while the process groups and the interpreter are alive:
            # with a gloo collective in flight across a profiler state change, leaving them to the interpreter's
            # last collection at exit let a gloo worker abort the process (torch 2.13, pytorch/pytorch#190489; a
            # plain torch.profiler loop: 6 of 12 tries, 0 of 11 collected before destroy_process_group()). A
            # mitigation, not a proven fix: docs/collectors.md.
            gc.collect()
            self._calls_ns += time.perf_counter_ns() - t0
        if self.activation is not None:
            self.activation.close(*exc)
        if self.flight_recorder:
            self.flight_dump, problem = flight_recorder_mod.dump(self.out_dir, self.rank, form=self.flight_recorder)
            if problem:
                self._report(problem)
        self._report_empty_run()
        self.overhead = self._measure_overhead()
        if self.rank == 0:
            self._manifest["profiler_overhead"] = self.overhead.to_dict()
            self._write_manifest(update=True)
        log.info(
            "tracekit: rank %d profiler overhead %.3f ms/step, export %.1f ms",
            self.rank,
            self.overhead.overhead_per_step_ns / 1e6,
            self.overhead.export_ns / 1e6,
        )
        return False

    # -- internals ------------------------------------------------------------------------------------------
    def _report_empty_run(self) -> None:
        """A profiled rank that ends with no trace because of how the loop ran (not a fault) says why."""
        if not self.enabled or self._schedule is None:
            return
        if not self._step_times:
            what = "the whole block was recorded as one step" if self.trace_paths else "nothing was recorded"
            self._report(f"rank {self.rank}: step() was never called, {what} (call p.step() at the end of every training step)")
        elif not any(self._schedule(s) in _RECORDED for s, _ in self._step_times):
            first = self.schedule_args["wait"] + self.schedule_args["warmup"]
            self._report(
                f"rank {self.rank}: no step was recorded: the schedule records from step {first}, the run "
                f"had {len(self._step_times)} steps"
            )

    def _start_flight_recorder(self) -> None:
        if self.flight_recorder not in ("pickle", "json"):
            self._report(f"flight_recorder={self.flight_recorder!r}: expected True, 'pickle' or 'json'; not dumped")
            self.flight_recorder = None
            return
        problem = flight_recorder_mod.enable()
        if problem:
            self._report(problem)

    def _start_activation(self) -> None:
        if not self.activation_memory:
            return
        if not isinstance(self.model, torch.nn.Module):
            self._report("activation_memory=True needs model=<the torch.nn.Module>; not measured")
            return
        try:
            self.activation = ActivationSession(self.model, self.layers, self.rank, self.out_dir).__enter__()
        except Exception as err:
            self._report(f"rank {self.rank}: activation memory not measured: {err}")
            self.activation = None
            return
        if self.activation.needs_profile_memory:
            self._opts["profile_memory"] = True  # CPU peaks come from the profiler's allocation events

    def _trace_path(self) -> Path:
        name = f"rank{self.rank}.trace.json.gz"
        return self.out_dir / name if self._cycle == 0 else self.out_dir / f"cycle{self._cycle}" / name

    def _stop_quietly(self) -> None:
        prof, self._prof = self._prof, None
        _ACTIVE.discard(id(self))
        with contextlib.suppress(Exception):
            prof.__exit__(None, None, None)

    def _export(self, prof) -> None:
        """Write to a hidden partial file (the loader skips dot-files), check it is a complete gzip stream that
        ends the JSON document, then give it the trace's name. A failure leaves no file under that name."""
        if self.activation is not None:
            self.activation.collect_peaks(prof)
        t0 = time.perf_counter_ns()
        path = self._trace_path()
        partial = path.parent / f".{path.name}.partial.gz"
        self._cycle += 1
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(partial))
            if not _complete_json_gz(partial):
                raise OSError("the written trace is incomplete (disk full or file size limit?)")
            os.replace(partial, path)
            self.trace_paths.append(path)
        except Exception as err:
            self._report(f"rank {self.rank} could not write {path}: {err}; training continues")
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
        self._export_ns += time.perf_counter_ns() - t0

    def _write_manifest(self, update: bool = False) -> None:
        try:
            if not update:
                groups = self.groups
                if groups is None and hasattr(self.layout, "created"):
                    groups = self.layout.created
                layout = self._checked_layout(getattr(self.layout, "layout", self.layout))
                self._manifest = manifest_mod.build(
                    layout=layout,
                    groups=groups,
                    model=self.model_dims,
                    schedule=self.schedule_args if self._schedule is not None else None,
                    profiled_ranks=self.ranks if self.ranks is not None else range(self.world_size),
                )
                self._manifest["activation_memory"] = self.activation_memory
                if self.workload:
                    self._manifest["workload"] = self.workload
            manifest_mod.write(self.out_dir / manifest_mod.MANIFEST_NAME, self._manifest)
        except Exception as err:
            self._report(f"could not write the run manifest in {self.out_dir}: {err}")

    def _checked_layout(self, layout: object) -> object:
        """A mapping given as ``layout=`` as a ParallelLayout; a malformed one is reported and recorded as given."""
        if not isinstance(layout, Mapping) or isinstance(layout, ParallelLayout):
            return layout
        try:
            return ParallelLayout.from_dict(layout, where="profile(layout=...)")
        except LayoutError as exc:
            self._report(f"{exc}; recorded in the run manifest as given")
            return dict(layout)

    def _measure_overhead(self) -> ProfileOverhead:
        prof_ns: list[int] = []
        before: list[int] = []
        after: list[int] = []
        schedule = self._schedule or (lambda _step: ProfilerAction.NONE)
        for step, ns in self._step_times:
            if self.enabled and schedule(step) in _RECORDED:
                prof_ns.append(ns)
            elif schedule(step) == ProfilerAction.NONE:
                (after if prof_ns else before).append(ns)
        # Baseline: the unprofiled steps before recording, less the first (one-off costs); steps after a cycle
        # pay for other ranks' trace collection, so they are the fallback only.
        plain_ns = before[1:] or after or before
        mean = lambda xs: int(sum(xs) / len(xs)) if xs else -1
        over = mean(prof_ns) - mean(plain_ns) if prof_ns and plain_ns else -1
        return ProfileOverhead(
            self.rank,
            len(self._step_times),
            len(plain_ns),
            len(prof_ns),
            mean(plain_ns),
            mean(prof_ns),
            over,
            self._calls_ns,
            self._export_ns,
        )


_RECORDED = frozenset({ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE})
_ACTIVE: set[int] = set()  # tracekit profilers recording in this process


def _profiler_running() -> bool:
    """Another profiler active in this process: a tracekit one, or torch's autograd profiler recording."""
    if _ACTIVE:
        return True
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except Exception:
        return False


def _complete_json_gz(path: Path) -> bool:
    """The file inflates without error and its JSON ends with the closing brace (Kineto writes one object)."""
    tail = b""
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                tail = (tail + chunk)[-64:]
    except (OSError, EOFError):
        return False
    return tail.rstrip().endswith(b"}")
