"""Reference workloads: a transformer layer under TP, TP+SP, CP ring attention, Ulysses and DP (and their
combinations on a device mesh), each with an overlap variant. Entry point: :func:`runner.run_workload`."""

from .config import WorkloadConfig
from .runner import RunResult, run_workload

__all__ = ["RunResult", "WorkloadConfig", "run_workload"]
