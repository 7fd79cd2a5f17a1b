"""Peak CPU tensor memory of a call, measured with the torch profiler (tests and benchmarks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from torch.profiler import ProfilerActivity, profile

T = TypeVar("T")


def peak_allocated_bytes(fn: Callable[[], T]) -> tuple[T, int]:
    """Run ``fn`` and return its result and the peak of tensor bytes it held at once.

    Replays the profiler's per-op self allocations/frees in start-time order; tensors that
    existed before the call are not counted.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    running = peak = 0
    for event in sorted(prof.events(), key=lambda e: (e.time_range.start, e.id)):
        running += event.self_cpu_memory_usage
        peak = max(peak, running)
    return result, peak
