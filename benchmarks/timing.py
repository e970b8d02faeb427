"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def median_seconds(fn: Callable[[], object], repeats: int = 7, warmup: int = 2) -> float:
    """Median wall time of ``fn`` over ``repeats`` calls, after ``warmup`` untimed calls."""
    return statistics.median(wall_seconds(fn, repeats, warmup))


def wall_seconds(fn: Callable[[], object], repeats: int, warmup: int = 1) -> list[float]:
    """Wall time of each of ``repeats`` calls of ``fn``, after ``warmup`` untimed calls; CUDA work is
    waited for (synchronized) before each clock reading, since its launches return at once."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - start)
    return times


def synchronize() -> None:
    """Wait for queued CUDA work (a no-op without CUDA)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
