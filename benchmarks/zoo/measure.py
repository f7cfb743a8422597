"""Stage "measure": wall-clock time per iteration and peak memory of one step.

Input: zero-argument step callables (one eager, one compiled) and a device. Output: seconds
per iteration (medians of interleaved trials) and peak bytes of one step.

Timing (the loops are `benchmarks/timing.py`'s): the steps alternate within every trial, in
ABBA order (eager first on even trials, compiled first on odd ones), so that drift of a shared
machine hits both alike; each trial times `repeat` back-to-back iterations, CUDA synchronised at
both ends. The speedup is the median over trials of the ratio within a trial
(`paired_speedup`).

Peak memory of one step, by device:
- CUDA: `torch.cuda.max_memory_allocated()` after `reset_peak_memory_stats()`, minus the bytes
  allocated before the step (tensor memory held by the caching allocator).
- CPU (Linux): the resident-set high-water mark (`VmHWM`) reached during the step minus the
  resident size just before it. Before the step, glibc's mmap threshold is pinned to 128 KiB
  (`mallopt`) so that tensors larger than that are returned to the system when freed, one
  unmeasured step runs, the heap is trimmed (`malloc_trim`) and the high-water mark is reset
  (`/proc/self/clear_refs`). This
  counts every byte the step adds (tensors, library workspaces, kernel scratch), which is what
  a user's machine must hold; small allocations below the threshold are included as they are.
"""
from __future__ import annotations

import ctypes
import statistics
from typing import Callable, Optional

import torch

from benchmarks import timing

Step = Callable[[], object]
_MMAP_THRESHOLD_OPTION = -3  # glibc's M_MMAP_THRESHOLD
_CPU_MMAP_THRESHOLD = 128 * 1024


def synchronize(device: str) -> None:
    """Wait for queued device work (a no-op on CPU)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(step: Step, repeat: int, device: str) -> float:
    """Seconds per iteration over `repeat` back-to-back calls of `step`."""
    return timing.seconds_per_call(step, repeat, lambda: synchronize(device))


def calibrate_repeat(step: Step, device: str, target_seconds: float, limit: int = 100) -> int:
    """How many iterations make one trial last about `target_seconds` (at least one)."""
    seconds = time_steps(step, 1, device)
    if seconds <= 0:
        return limit
    return max(1, min(limit, round(target_seconds / seconds)))


def interleaved(eager: Step, compiled: Optional[Step], trials: int, repeat: int,
                device: str) -> dict:
    """Median and all per-iteration times of `eager` and `compiled` over interleaved trials
    (`compiled=None` times eager alone)."""
    steps = {"eager": eager, "compiled": compiled} if compiled is not None else {"eager": eager}
    times = timing.interleaved_samples(steps, trials, dict.fromkeys(steps, repeat),
                                       lambda: synchronize(device))
    return {name: {"median": statistics.median(values), "all": values}
            for name, values in times.items() if values}


def paired_speedup(eager: list[float], compiled: list[float]) -> float:
    """Median over trials of eager time / compiled time within the same trial: robust to a
    shared machine whose speed drifts between trials (both steps of a trial see the same)."""
    return statistics.median(e / c for e, c in zip(eager, compiled))


def peak_memory(step: Step, device: str) -> tuple[Optional[int], str]:
    """Peak bytes that one call of `step` adds on `device`, and the method's name (see the
    module docstring); `(None, reason)` where no method is available."""
    if device.startswith("cuda"):
        synchronize(device)
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        synchronize(device)
        return torch.cuda.max_memory_allocated() - before, "cuda max_memory_allocated"
    return _cpu_peak(step)


def _cpu_peak(step: Step) -> tuple[Optional[int], str]:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_MMAP_THRESHOLD_OPTION, _CPU_MMAP_THRESHOLD)
        step()  # one unmeasured step under the pinned threshold: lazily made state settles
        libc.malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as control:
            control.write("5")
    except OSError as error:
        return None, f"unavailable ({error})"
    before = _status_bytes("VmRSS:")
    step()
    return max(0, _status_bytes("VmHWM:") - before), "cpu rss high-water (mmap 128KiB)"


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise OSError(f"{key} not in /proc/self/status")
