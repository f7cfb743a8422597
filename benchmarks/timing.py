"""The one timing module of `benchmarks/`: warm-up, device synchronization, repeats,
interleaved trials, medians, quantiles and best trials, cold compile times.

Input: callables (and a `synchronize` callable that waits for queued device work, a no-op by
default). Output: seconds (or microseconds) per call.
- `seconds_per_call` (back-to-back calls, synchronized at both ends) and `timed` (one call and
  its result) are the two wall-clock loops everything else is built on;
- `interleaved_samples` runs trials of several variants in rotating order (two variants: ABBA),
  so load changes on a shared machine hit all variants alike; `interleaved` adds warm-up,
  calibration and per name the median, the spread (interquartile range / median) as a noise
  figure and the best trial; the zoo (`benchmarks/zoo/measure.py`) uses the samples;
- `best_per_call_us` / `median_per_call_us` (of `timeit` repeats), `best_seconds` and
  `median_seconds` (single calls) serve the micro-benchmarks of the hook, guards, capture and
  inductor;
- `cuda_event_seconds` times GPU work with CUDA events (device time, for the Triton
  benchmarks).
Loops that split one call into phases (forward / backward / optimizer, host enqueue / wall) or
time code from inside a compiled graph (wrappers around kernel entry points) take their own
timestamps where they run: `benchmarks/README.md` lists them.

torch.compile's cold compile time is measured with a fresh `TORCHINDUCTOR_CACHE_DIR` and its
FX graph cache off; ours with a fresh `JIT_CACHE_DIR`. Set both before importing torch: run
each measurement in a fresh process (`fresh_caches()` does it for the current one).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
import timeit
from typing import Callable


def fresh_caches() -> str:
    """Point both compilers at empty cache directories (call before importing torch).

    Also sets `OMP_WAIT_POLICY=PASSIVE` unless the environment chose a policy: on a shared,
    oversubscribed machine, OpenMP threads spinning at barriers for a descheduled team mate
    turned 50 ms forwards into 2 s ones, for eager and both compilers alike (one OpenMP
    runtime serves all three)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    root = tempfile.mkdtemp(prefix="framejit-bench-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "torchinductor")
    os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    os.environ["JIT_CACHE_DIR"] = os.path.join(root, "framejit")
    return root


def _no_wait() -> None:
    pass


def seconds_per_call(function: Callable, calls: int, synchronize: Callable = _no_wait,
                     clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call over `calls` back-to-back calls, `synchronize` at both ends (the
    default adds not even a call to the timed span). `clock`: wall time, or
    `time.process_time` for the CPU time of the process."""
    wait = synchronize is not _no_wait
    if wait:
        synchronize()
    started = clock()
    for _ in range(calls):
        function()
    if wait:
        synchronize()
    return (clock() - started) / calls


def calls_per_trial(function: Callable, budget: float = 0.05,
                    synchronize: Callable = _no_wait) -> int:
    """How many calls fill about `budget` seconds (at least one)."""
    elapsed = max(seconds_per_call(function, 1, synchronize), 1e-7)
    return max(1, min(1000, int(budget / elapsed)))


def interleaved_samples(variants: dict, trials: int, counts: dict,
                        synchronize: Callable = _no_wait,
                        clock: Callable[[], float] = time.perf_counter) -> dict:
    """{name: [seconds per call of each trial]}: every trial times `counts[name]` calls of
    each variant, the variants in rotating order (first, second, ... then second, ..., first;
    for two variants ABBA), synchronized once per variant and trial, not per call."""
    samples: dict = {name: [] for name in variants}
    names = list(variants)
    for trial in range(trials):
        order = names[trial % len(names):] + names[:trial % len(names)]
        for name in order:
            samples[name].append(seconds_per_call(variants[name], counts[name], synchronize,
                                                  clock))
    return samples


def interleaved(variants: dict, trials: int = 21, warmup: int = 3,
                synchronize: Callable = _no_wait) -> dict:
    """{name: (median seconds per call, relative spread, best trial)} over interleaved
    trials. On a loaded machine the best trial is the steadier estimate of the true cost.
    `synchronize` waits for queued device work (once per trial, not per call)."""
    for function in variants.values():
        for _ in range(warmup):
            function()
    counts = {name: calls_per_trial(function, synchronize=synchronize)
              for name, function in variants.items()}
    samples = interleaved_samples(variants, trials, counts, synchronize)
    results = {}
    for name, values in samples.items():
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4)
        results[name] = (median, (quartiles[2] - quartiles[0]) / median if median else 0.0,
                         min(values))
    return results


def timed(function: Callable, synchronize: Callable = _no_wait):
    """(result, seconds) of one call (a cold compile: the first call), `synchronize` at both
    ends."""
    wait = synchronize is not _no_wait
    if wait:
        synchronize()
    started = time.perf_counter()
    result = function()
    if wait:
        synchronize()
    return result, time.perf_counter() - started


def load_average() -> str:
    """The 1-minute load average (how shared the machine was)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def best_per_call_us(function: Callable, number: int, repeat: int = 7) -> float:
    """Best of `repeat` `timeit` repeats of `number` calls, in microseconds per call."""
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e6


def median_per_call_us(function: Callable, number: int, repeat: int = 7) -> float:
    """Median of `repeat` `timeit` repeats of `number` calls, in microseconds per call."""
    return statistics.median(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e6


def best_seconds(function: Callable, repeats: int) -> float:
    """The shortest of `repeats` single calls, in seconds, after one warm-up call."""
    function()
    return min(timed(function)[1] for _ in range(repeats))


def median_seconds(function: Callable, iterations: int) -> float:
    """The median of `iterations` single calls, in seconds (no warm-up)."""
    return statistics.median(timed(function)[1] for _ in range(iterations))


def cuda_event_seconds(function: Callable, input_sets: list, repeats: int = 20,
                       trials: int = 7) -> float:
    """Median device seconds per call over `trials` batches, each batch `repeats` calls
    rotating through `input_sets` (so no input stays in L2), timed by CUDA events recorded
    around the batch; one warm-up call per input set first."""
    import torch
    for inputs in input_sets:
        function(*inputs)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(trials):
        start.record()
        for call in range(repeats):
            function(*input_sets[call % len(input_sets)])
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1000 / repeats)
    return statistics.median(samples)
