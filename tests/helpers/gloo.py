"""What the tests' own two-process gloo workers share."""

import time


def busy(seconds: float) -> None:
    """Real host compute for ``seconds`` (small matmuls): time the profiler records inside operators."""
    import torch

    a = torch.randn(32, 32) / 8
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ a)
