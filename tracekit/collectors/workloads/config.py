"""WorkloadConfig: which workload, on which layout, with which shapes."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from ...errors import ConfigError
from ...model.dtypes import WORKLOAD_TORCH_NAMES
from ...model.layout import CpKind, LayoutError, ParallelLayout
from ..workload_catalog import WORKLOAD_HELP, WORKLOADS, ZERO

__all__ = ["DTYPES", "WORKLOAD_HELP", "WORKLOADS", "ZERO", "WorkloadConfig"]
DTYPES = {short: getattr(torch, name) for short, name in WORKLOAD_TORCH_NAMES.items()}  # {"fp32": torch.float32, ...}


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """``workload``: one of WORKLOADS or a combination joined by ``+`` ("tp-sp+cp-ring", "tp+dp"). A degree
    left as None is 2 for the dimensions the workload names and 1 otherwise; ``cp`` sets the context-parallel
    degree of both cp-ring and ulysses. ``steps``: profiled steps; ``wait``/``warmup`` steps run before them
    and ``tail`` unprofiled steps after them (the baseline of the profiler-overhead figure).

    ``ep`` (the mixture-of-experts MLP of moe.py): ``experts`` experts over an ep group of ``ep`` ranks (default 2)
    carved out of dp x cp; dp defaults to the smallest degree that holds the ep group. ``top_k`` experts per
    token, ``capacity_factor``: each expert takes at most ceil(factor x tokens x top_k / experts) of a rank's
    tokens."""

    workload: str = "tp-sp"
    tp: int | None = None
    cp: int | None = None
    dp: int | None = None
    layers: int = 2
    seq: int = 64
    hidden: int = 64
    heads: int = 8
    batch: int = 2
    dtype: str = "fp32"
    overlap: bool = False
    steps: int = 3
    wait: int = 2
    warmup: int = 1
    tail: int = 0
    dropout: float = 0.1
    chunks: int = 2
    activation_memory: bool = False
    profile_memory: bool = False  # [memory] events in the traces: the summary's memory_timeline
    seed: int = 0
    bucket_numel: int | None = None
    pp: int | None = None  # pipeline stages (workload pp: the layers split into stages, 1F1B over microbatches)
    microbatches: int = 4
    delay: str | None = None  # "RANK:MS": that rank sleeps MS ms per step in record_function("tracekit:delay")
    flight_recorder: bool = False  # dump each rank's Flight Recorder ring beside its trace (_dump_<rank>)
    ep: int | None = None
    experts: int = 4
    top_k: int = 2
    capacity_factor: float = 1.25

    @property
    def parts(self) -> tuple[str, ...]:
        parts = tuple(p.strip() for p in self.workload.split("+") if p.strip())
        if not parts or len(set(parts)) < len(parts):  # '' or 'tp+tp' ran a workload nobody named
            raise ConfigError(
                f"workload {self.workload!r}: name each workload once; choose from {', '.join(WORKLOADS)} (combine with '+')"
            )
        for p in parts:
            if p not in WORKLOADS:
                raise ConfigError(
                    f"unknown workload {p!r} in {self.workload!r}; choose from {', '.join(WORKLOADS)} (combine with '+')"
                )
        if "cp-ring" in parts and "ulysses" in parts:
            raise ConfigError("cp-ring and ulysses are two ways to split the context; pick one")
        if sum(p in ("dp", *ZERO) for p in parts) > 1:
            raise ConfigError(
                f"workload {self.workload!r}: dp, zero3 and zero1 are three ways to synchronise the "
                "data-parallel gradients; pick one (set its degree with --dp)"
            )
        return parts

    @property
    def zero_stage(self) -> int:
        """3 or 1 when the workload shards over the dp group with ZeRO, else 0."""
        return next((ZERO[p] for p in self.parts if p in ZERO), 0)

    def layout(self) -> ParallelLayout:
        parts = self.parts
        named = lambda *names: 2 if any(n in parts for n in names) else 1
        tp = self.tp if self.tp is not None else named("tp", "tp-sp")
        cp = self.cp if self.cp is not None else named("cp-ring", "ulysses")
        dp = self.dp if self.dp is not None else named("dp", *ZERO)
        pp = self.pp if self.pp is not None else named("pp")
        ep = self.ep if self.ep is not None else named("ep")
        if "ep" in parts and self.dp is None and cp >= 1 and ep >= 1:
            dp = math.lcm(dp, ep // math.gcd(ep, cp))
        if "ep" in parts and pp != 1:
            raise ConfigError(f"workload {self.workload}: ep inside pipeline stages is not built; drop pp or ep")
        if ep != 1 and "ep" not in parts:
            raise ConfigError(f"workload {self.workload}: --ep {ep} needs the ep workload (add '+ep')")
        if min(dp, cp, ep) >= 1 and (dp * cp) % ep:
            raise ConfigError(
                f"workload {self.workload}: --ep {ep} must divide dp x cp = {dp * cp} (the expert "
                "group is carved out of the data- and context-parallel ranks); change --ep or --dp"
            )
        try:
            return ParallelLayout(
                tp=tp,
                cp=cp,
                dp=dp,
                pp=pp,
                ep=ep,
                sequence_parallel="tp-sp" in parts,
                cp_kind=CpKind.ULYSSES if "ulysses" in parts else CpKind.RING,
            )
        except LayoutError:
            raise ConfigError(f"workload {self.workload}: degrees, layers, steps >= 1") from None

    @property
    def torch_dtype(self) -> torch.dtype:
        if self.dtype not in DTYPES:
            raise ConfigError(f"unknown dtype {self.dtype!r}; use bf16 or fp32")
        return DTYPES[self.dtype]

    def validate(self) -> ParallelLayout:
        """The layout, once the shapes shard evenly on it (the layout's own head and sequence shards; a ring
        also splits each rank's sequence in two for the load-balanced zig-zag, the overlap variant in chunks)."""
        lay, _ = self.layout(), self.torch_dtype
        sizes = (("--hidden", self.hidden), ("--heads", self.heads), ("--seq", self.seq), ("--batch", self.batch))
        for flag, value in sizes:  # before the divisibility checks below: --heads 0 was a ZeroDivisionError traceback
            if value < 1:
                raise ConfigError(f"workload {self.workload}: {flag} {value} must be >= 1")
        ring = lay.cp_kind is CpKind.RING
        checks = [
            (self.hidden % self.heads == 0, f"--hidden {self.hidden} must be a multiple of --heads {self.heads}"),
            (self.heads % lay.head_shards == 0, f"--heads {self.heads} must divide by tp{'' if ring else ' x cp'}"),
            (self.batch % lay.dp == 0, f"--batch {self.batch} must divide by --dp {lay.dp}"),
            (
                self.seq % ((2 if ring else 1) * lay.cp) == 0,
                f"--seq {self.seq} must divide by {'2 x ' if ring else ''}--cp {lay.cp}",
            ),
            (
                not lay.sequence_parallel or self.seq % (lay.sequence_shards * self.chunks) == 0,
                f"--seq {self.seq} / cp must divide by tp x chunks ({lay.tp} x {self.chunks}) for sequence parallel",
            ),
            (
                lay.sequence_parallel or self.seq % (lay.sequence_shards * self.chunks) == 0,
                f"--seq {self.seq} / cp must divide by chunks",
            ),
            (min(self.layers, self.steps, self.chunks) >= 1, "degrees, layers, steps >= 1"),
            (self.layers % lay.pp == 0, f"--layers {self.layers} must divide by --pp {lay.pp} (equal stages)"),
            (
                lay.pp == 1 or (self.microbatches >= 1 and self.batch % (lay.dp * self.microbatches) == 0),
                f"--batch {self.batch} must divide by --dp x --microbatches ({lay.dp} x {self.microbatches})",
            ),
            (
                lay.pp == 1 or not any(p in ZERO for p in self.parts),
                "the pipeline runs dense stages: combine pp with dp, not with zero3/zero1",
            ),
            (
                "ep" not in self.parts or not any(p in ZERO for p in self.parts),
                "ep syncs its dense and expert gradients itself: combine ep with dp, not with zero3/zero1",
            ),
            (self.experts >= 1 and self.experts % lay.ep == 0, f"--experts {self.experts} must divide by --ep {lay.ep}"),
            (1 <= self.top_k <= self.experts, f"--top-k {self.top_k} must be between 1 and --experts {self.experts}"),
            (self.capacity_factor > 0, f"--capacity-factor {self.capacity_factor} must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"workload {self.workload}: {message}")
        delay = self.delay_spec
        if delay is not None and delay[0] >= lay.world_size:
            raise ConfigError(
                f"--delay {self.delay}: rank {delay[0]} is not in the run's {lay.world_size} "
                f"processes; give a rank from 0 to {lay.world_size - 1}"
            )
        return lay

    @property
    def delay_spec(self) -> tuple[int, float] | None:
        """(rank, milliseconds) of ``delay`` ("RANK:MS"), or None."""
        if self.delay is None:
            return None
        rank, sep, ms = str(self.delay).partition(":")
        try:
            spec = (int(rank), float(ms)) if sep else None
        except ValueError:
            spec = None
        if spec is None or spec[0] < 0 or not 0 <= spec[1] < 1e6:
            raise ConfigError(f"--delay {self.delay!r}: expected RANK:MS, a rank >= 0 and milliseconds >= 0 (e.g. --delay 1:40)")
        return spec

    def model_dims(self, device_type: str = "cpu") -> dict:
        """The ``model`` dict of run.json: what the activation-memory model needs. ``batch`` is one rank's
        micro-batch (the global batch over dp); LayerNorm saves its mean and rstd in the activation dtype on
        CPU, fp32 on CUDA (``layernorm_stat_bytes``); the dropout masks are ``torch.native_dropout``'s bools."""
        lay = self.layout()
        if "ep" in self.parts:  # no Korthikanti term for a routed MLP: measured only (docs/collectors.md)
            return {
                "layers": self.layers,
                "seq": self.seq,
                "hidden": self.hidden,
                "heads": self.heads,
                "micro_batch": self.batch // lay.dp,
                "global_batch": self.batch,
                "dtype": self.dtype,
                "dropout": self.dropout,
                "mlp": "moe",
                "experts": self.experts,
                "top_k": self.top_k,
                "capacity_factor": self.capacity_factor,
                "expert_ffn_hidden": 4 * self.hidden,
                "ep": lay.ep,
                "tp": lay.tp,
                "cp": lay.cp,
                "sp": lay.sequence_parallel and lay.tp > 1,
            }
        return {
            "layers": self.layers,
            "seq": self.seq,
            "hidden": self.hidden,
            "heads": self.heads,
            "batch": self.batch // lay.dp,
            "global_batch": self.batch,
            "dtype": self.dtype,
            "dropout": self.dropout,
            "ffn_hidden": 4 * self.hidden,
            "tp": lay.tp,
            "cp": lay.cp,
            "sp": lay.sequence_parallel and lay.tp > 1,
            "cp_kind": lay.cp_kind.value,
            "mask_bytes": 1,
            "layernorm_stat_bytes": 4 if device_type == "cuda" else self.torch_dtype.itemsize,
            **({"pp": lay.pp, "microbatches": self.microbatches} if lay.pp > 1 else {}),
        }

    def to_dict(self) -> dict:
        return asdict(self)
