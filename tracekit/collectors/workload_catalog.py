"""The reference workloads by name, with one line each for `tracekit run --help`: kept apart from
:mod:`.workloads` (which imports torch) so that the CLI lists them in an install without torch."""

from __future__ import annotations

WORKLOADS: tuple[str, ...] = ("tp", "tp-sp", "cp-ring", "ulysses", "dp")
WORKLOADS += ("pp",)  # collectors/workloads/pipeline.py
WORKLOADS += ("zero3", "zero1")  # collectors/workloads/zero.py
WORKLOADS += ("ep",)  # collectors/workloads/moe.py
# one line per workload for `tracekit run --help` (a test holds it equal to WORKLOADS)
WORKLOAD_HELP = {
    "tp": "tensor parallel: Megatron column/row-parallel linears, all-reduces on the tp group",
    "tp-sp": "tensor + sequence parallel: all-gather / reduce-scatter conjugates on the tp group",
    "cp-ring": "context parallel: ring attention (online softmax, load-balanced zig-zag split)",
    "ulysses": "context parallel by all-to-all over heads (DeepSpeed Ulysses)",
    "dp": "data parallel: bucketed gradient all-reduce on the dp group",
}
WORKLOAD_HELP["pp"] = "pipeline: 1F1B over --microbatches, activations sent stage to stage (pp group)"
WORKLOAD_HELP["zero3"] = "ZeRO-3 / FSDP2: parameters all-gathered per layer, gradients reduce-scattered (dp group)"
WORKLOAD_HELP["zero1"] = "ZeRO-1: gradients reduce-scattered, the sharded update all-gathered back (dp group)"
WORKLOAD_HELP["ep"] = "mixture of experts: --experts over --ep ranks, top-k with capacity, all-to-all dispatch/combine"
ZERO = {"zero3": 3, "zero1": 1}  # workload -> ZeRO stage (sharding over the dp group instead of dp's all-reduce)
