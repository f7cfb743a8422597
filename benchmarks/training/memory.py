"""Peak memory of one training step, measured at torch's allocator.

Input: a step (a callable). Output: the peak of bytes allocated by torch during the step, minus
what was allocated when it began.

- CUDA: `torch.cuda.max_memory_allocated()` after `reset_peak_memory_stats()`, minus
  `memory_allocated()` before.
- CPU: torch's profiler with `profile_memory=True` reports every allocation and free made by
  torch's CPU allocator while it records (`[memory]` events with signed byte counts). Sorted by
  time, their running sum is the live bytes the step added; its maximum is the peak. Frees of
  blocks allocated before recording are not reported, so a step must not free pre-existing
  tensors for the comparison to be fair: call `zero_grad(set_to_none=True)` before measuring,
  so the step allocates its `.grad`s itself (eager and compiled steps alike). Unlike RSS, this
  does not depend on malloc's caching or on other allocations of the process.
"""
from __future__ import annotations

from typing import Callable

import torch


def peak_bytes(step: Callable[[], object], device: str = "cpu") -> int:
    """Peak bytes torch allocated during `step()` beyond what was live when it started."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    return allocation_trace(step)[0]


def allocation_trace(step: Callable[[], object]) -> tuple[int, int]:
    """CPU: (peak, net), the maximum of bytes torch allocated and had not yet freed while
    `step()` ran, and what was still allocated when it returned (see the module docstring)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recording:
        step()
    events = sorted((event.start_ns(), event.nbytes())
                    for event in recording.profiler.kineto_results.events()
                    if event.name() == "[memory]")
    live = peak = 0
    for _, size in events:
        live += size
        peak = max(peak, live)
    return peak, live
