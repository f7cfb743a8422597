"""Timing for every micro-benchmark here: interleaved trials, best and median of repeats,
cold compile times.

Input: callables. Output: seconds (or microseconds) per call. `interleaved` gives per name the
median seconds per call over interleaved trials (each trial runs every variant once, in
rotating order, so load changes on a shared machine hit all variants alike), and the spread
(interquartile range / median) as a noise figure; `best_per_call_us` (best of `timeit`
repeats), `best_seconds` and `median_seconds` (single calls) serve the micro-benchmarks of the
hook, guards, capture and inductor. The zoo (`benchmarks/zoo/measure.py`) keeps its own
interleaved trials with device synchronization and memory, and the GPU kernel benchmarks time
with CUDA events (`benchmarks/triton/streaming.time_rotating`).

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


def calls_per_trial(function: Callable, budget: float = 0.05,
                    synchronize: Callable = lambda: None) -> int:
    """How many calls fill about `budget` seconds (at least one)."""
    synchronize()
    started = time.perf_counter()
    function()
    synchronize()
    elapsed = max(time.perf_counter() - started, 1e-7)
    return max(1, min(1000, int(budget / elapsed)))


def interleaved(variants: dict, trials: int = 21, warmup: int = 3,
                synchronize: Callable = lambda: None) -> dict:
    """{name: (median seconds per call, relative spread, best trial)} over interleaved
    trials. On a loaded machine the best trial is the steadier estimate of the true cost.
    `synchronize` waits for queued device work (once per trial, not per call)."""
    for function in variants.values():
        for _ in range(warmup):
            function()
    counts = {name: calls_per_trial(function, synchronize=synchronize)
              for name, function in variants.items()}
    samples: dict = {name: [] for name in variants}
    names = list(variants)
    for trial in range(trials):
        order = names[trial % len(names):] + names[:trial % len(names)]
        for name in order:
            function, count = variants[name], counts[name]
            synchronize()
            started = time.perf_counter()
            for _ in range(count):
                function()
            synchronize()
            samples[name].append((time.perf_counter() - started) / count)
    results = {}
    for name, values in samples.items():
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4)
        results[name] = (median, (quartiles[2] - quartiles[0]) / median if median else 0.0,
                         min(values))
    return results


def timed(function: Callable):
    """(result, seconds) of one call."""
    started = time.perf_counter()
    result = function()
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


def best_seconds(function: Callable, repeats: int) -> float:
    """The shortest of `repeats` single calls, in seconds, after one warm-up call."""
    function()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return best


def median_seconds(function: Callable, iterations: int) -> float:
    """The median of `iterations` single calls, in seconds (no warm-up)."""
    times = []
    for _ in range(iterations):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
