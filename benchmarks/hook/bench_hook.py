"""What the frame hook costs (benchmark; input: nothing; output: tables of nanoseconds per call and
slowdown ratios). Torch-free: it measures the C hook alone.

1. The cache-hit path against a plain call, for functions of 0, 1 and 5 arguments:
   - `plain`: no eval-frame function installed;
   - `hook, skipped code`: a callback installed, the code object marked skip (the per-frame
     decision alone);
   - `hit, no check`: an entry whose check is None, so the walk builds `L`, takes the entry and
     runs the replacement through a fresh function object;
   - `hit, Python check`: the same with a check `lambda L, G: True` (one Python call more).
2. Unrelated Python code while the hook is installed: call-heavy (recursive fib), loop-heavy
   (no calls) and mixed (sorting with a key function) workloads, run
   - with no hook,
   - while another thread has a callback (this thread has none: the eval function is installed
     interpreter-wide and answers at once),
   - on a thread whose callback skips every code object (each frame pays the decision, and
     CPython stops inlining Python-to-Python calls while any eval function is set).

Run: `PYTHONPATH=. python benchmarks/hook/bench_hook.py [--quick]`.
"""
from __future__ import annotations

import argparse
import threading
from typing import Callable

from benchmarks.timing import best_seconds as best_of_calls
from dynamo import _C, hook
from dynamo.rewrite import nop_rewrite

REPEATS = 7


def zero():
    return 0


def one(a):
    return a


def five(a, b, c, d, e):
    return e


def loop_calling(function: Callable, arguments: tuple, count: int) -> Callable[[], None]:
    """A loop of `count` calls of `function(*arguments)`, the thing timed."""
    def run():
        for _ in range(count):
            function(*arguments)
    return run


def nested(depth: int, run: Callable[[], None]) -> None:
    """Call `run()` from `depth` extra Python frames (each with a few locals)."""
    if depth == 0:
        return run()
    pad_a = pad_b = pad_c = depth  # noqa: F841  (frame size)
    return nested(depth - 1, run)


def best_seconds(run: Callable[[], None], callback=None, depth: int = 0) -> float:
    """Best of REPEATS wall times of `run()`, called `depth` frames deep with `callback`
    installed (through the C wrapper, so no extra Python frame) or with no hook at all."""
    def deep():
        nested(depth, run)
    wrapped = deep if callback is None else _C.ScopedCall(deep, callback)
    return best_of_calls(wrapped, REPEATS)  # after a warm-up: specialisation, cache entries


DEPTHS = range(12)


def typical_seconds(run: Callable[[], None], callback=None) -> tuple[float, float]:
    """(median, worst) over call depths of `best_seconds`.

    CPython keeps frames in 16 KiB chunks; a call whose frame does not fit in the current chunk
    allocates a new one and frees it on return, which costs several hundred nanoseconds. Where
    that boundary falls depends on how deep the caller is, so every case is timed at several
    depths: the median is the typical cost, the worst is a call that straddles a boundary.
    """
    times = sorted(best_seconds(run, callback, depth) for depth in DEPTHS)
    return times[len(times) // 2], times[-1]


class SkipAll:
    """A callback that marks every code object skip on first sight."""

    def __call__(self, view):
        return hook.SKIP


class Targeted:
    """A callback that answers SKIP for everything but `code`, which already has entries."""

    def __init__(self, code):
        self.code = code

    def __call__(self, view):
        return None if view.f_code is self.code else hook.SKIP


def cache_hit_rows(count: int) -> list[tuple[str, list[float]]]:
    rows = []
    cases = [("0 args", zero, ()), ("1 arg", one, (1,)), ("5 args", five, (1, 2, 3, 4, 5))]
    columns: dict[str, list[float]] = {name: [] for name in (
        "plain", "hook, skipped code", "hit, no check", "hit, Python check")}
    worst: dict[str, list[float]] = {name: [] for name in columns}

    def record(name, run, callback=None):
        median, slowest = typical_seconds(run, callback)
        columns[name].append(median / count)
        worst[name].append(slowest / count)

    for _, function, arguments in cases:
        code = function.__code__
        run = loop_calling(function, arguments, count)
        record("plain", run)
        hook.mark_skip(code)
        record("hook, skipped code", run, SkipAll())
        hook.clear_all()
        hook.add_entry(code, None, nop_rewrite(code))
        record("hit, no check", run, Targeted(code))
        hook.clear_all()
        hook.add_entry(code, lambda L, G: True, nop_rewrite(code))
        record("hit, Python check", run, Targeted(code))
        hook.clear_all()
    rows += [(name, values) for name, values in columns.items()]
    rows += [(f"{name} (worst depth)", values) for name, values in worst.items()]
    return rows


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def call_heavy():
    fib(20)


def loop_heavy():
    total = 0
    for i in range(60000):
        total += i * i % 7
    return total


def mixed():
    data = [(i * 7919) % 1000 for i in range(5000)]
    return sorted(data, key=lambda value: (value % 10, value))


class OtherThreadHolding:
    """Context manager: a second thread holds a callback until the block ends."""

    def __enter__(self):
        self._ready, self._release = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold)
        self._thread.start()
        self._ready.wait()
        return self

    def _hold(self):
        previous = hook.set_callback(SkipAll())
        self._ready.set()
        self._release.wait()
        hook.set_callback(previous)

    def __exit__(self, *exc_info):
        self._release.set()
        self._thread.join()
        return False


def unrelated_rows() -> list[tuple[str, list[float]]]:
    workloads = [call_heavy, loop_heavy, mixed]
    plain = [best_seconds(workload) for workload in workloads]
    with OtherThreadHolding():
        assert hook.counters()["installed"]
        other = [best_seconds(workload) for workload in workloads]
    skipped = [best_seconds(workload, SkipAll()) for workload in workloads]
    hook.clear_all()
    return [("no hook (ms)", [value * 1e3 for value in plain]),
            ("another thread has a callback", [o / p for o, p in zip(other, plain)]),
            ("this thread, every code skipped", [s / p for s, p in zip(skipped, plain)])]


def print_table(title: str, header: list[str], rows, unit: str) -> None:
    print(f"\n{title}")
    print(f"{'':34s}" + "".join(f"{name:>16s}" for name in header))
    for name, values in rows:
        cells = "".join(f"{value:>13.{1 if unit == 'ns' else 2}f} {unit:2s}" for value in values)
        print(f"{name:34s}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    options = parser.parse_args()
    if not hook.SUPPORTED:
        raise SystemExit(hook.unsupported_reason())
    count = 5000 if options.quick else 50000
    rows = [(name, [value * 1e9 for value in values]) for name, values in cache_hit_rows(count)]
    print_table("Cost per call (ns): median over call depths of the best of 7",
                ["0 args", "1 arg", "5 args"], rows, "ns")
    unrelated = unrelated_rows()
    print_table("Unrelated code while the hook is installed (time, then ratio to no hook)",
                ["fib(20)", "loop", "sort+key"], unrelated[:1], "ms")
    for name, values in unrelated[1:]:
        print(f"{name:34s}" + "".join(f"{value:>15.2f}x" for value in values))


if __name__ == "__main__":
    main()
