"""Per-call cost of a graph compiled once over symbolic sizes against one compiled per size.

Input: the sweep's function (`subjects.pointwise_reduction`, width 512) at a few batch sizes
(small ones, where the per-call Python path dominates). Output: a table of median (and best)
microseconds per call for each level, interleaved trials (the machine may be loaded):
- `compile_fx`: `inductor.compile_fx` of a static graph per size against one symbolic graph
  (batch dim symbolic, as the front end hands it), called straight; `compile_fx_width`: the
  width symbolic too (as `dynamic=True` makes every dim);
- `jit`: `dynamo.jit(dynamic=False)` (one entry per size) against `dynamo.jit(dynamic=True)`,
  the whole path a user gets (guards, the frame hook, the compiled graph);
- `guard` (not in the default levels): the guard check alone, exact tensor sizes against free
  ones plus the shape relations `jit` learns for this function.
Times are the process's CPU time by default (`--clock cpu`): on a machine shared with other
jobs, wall time mostly measures them. `--device cuda` runs the same levels on a GPU (the
Triton wrapper: sizes bound per call, grids computed from them, size arguments to each
launch); its default clock is wall time, synchronized once per trial, not per call, so small
batches measure the host's enqueueing, the per-call cost that differs between the two.
`--threads`: CPU threads for torch and the C++ kernels (1 by default, as the sweep).

    python -m benchmarks.dynamic.overhead [--sizes 2,4,8,64] [--trials 15] [--levels compile_fx,compile_fx_width,jit,guard]
        [--clock cpu|wall] [--device cpu|cuda] [--threads 1]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

from benchmarks.dynamic.subjects import pointwise_reduction
from benchmarks.timing import calls_per_trial, interleaved_samples

WIDTH = 512
DEVICE = {"name": "cpu"}     # set by main (--device)


def _inputs(batch: int) -> list:
    generator = torch.Generator().manual_seed(batch)
    return [value.to(DEVICE["name"]) for value in (
        torch.randn(batch, WIDTH, generator=generator),
        torch.randn(WIDTH, generator=generator), torch.randn(WIDTH, generator=generator))]


def _synchronize() -> None:
    if DEVICE["name"] != "cpu":
        torch.cuda.synchronize()


def _compile_fx_pair(sizes: list, dims: tuple = (0,)) -> dict:
    """{size: (static callable, symbolic callable)} over inductor.compile_fx, the input's
    `dims` symbolic (the batch; with dynamic=True the front end makes the width one too)."""
    import inductor
    from tests.inductor.symbolic_graphs import symbolic_graph

    width = (0,) if 1 in dims else ()
    symbolic = inductor.compile_fx(symbolic_graph(pointwise_reduction, _inputs(sizes[0]),
                                                  [dims, width, width]),
                                   _inputs(sizes[0]))
    pairs = {}
    for size in sizes:
        inputs = _inputs(size)
        static = inductor.compile_fx(torch.fx.symbolic_trace(pointwise_reduction),
                                     copy.deepcopy(inputs))
        expected = pointwise_reduction(*inputs)
        for compiled in (static, symbolic):
            torch.testing.assert_close(compiled(*inputs), expected)
        pairs[size] = (lambda s=static, i=inputs: s(*i), lambda s=symbolic, i=inputs: s(*i))
    return pairs


def _jit_pair(sizes: list) -> dict:
    """{size: (static callable, dynamic callable)} over dynamo.jit."""
    import dynamo

    static = dynamo.jit(pointwise_reduction, dynamic=False)
    dynamic = dynamo.jit(lambda x, w, b: pointwise_reduction(x, w, b), dynamic=True)
    dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, len(sizes) + 2)
    pairs = {}
    for size in sizes:
        inputs = _inputs(size)
        expected = pointwise_reduction(*inputs)
        for compiled in (static, dynamic):
            torch.testing.assert_close(compiled(*inputs), expected)
        pairs[size] = (lambda i=inputs: static(*i), lambda i=inputs: dynamic(*i))
    return pairs


def _guard_pair(sizes: list) -> dict:
    """{size: (static check, symbolic check)}: the guard check alone, as `jit` installs it for
    the function's three tensors: exact sizes against free sizes plus the `ShapeGuard` the
    front end writes (run natively where it can: `JIT_NATIVE_GUARDS=0` for Python)."""
    from guards import GuardSet
    from guards.kinds.shapes import ShapeGuard, SizeRead
    from guards.kinds.tensors import TensorMatchGuard
    from guards.sources import LocalSource

    names = ("x", "w", "b")
    sources = [LocalSource(name) for name in names]
    shapes = ShapeGuard((("s0", SizeRead(sources[0], "size", 0)),
                         ("s1", SizeRead(sources[0], "size", 1)),
                         ("v2", SizeRead(sources[0], "stride", 0)),
                         ("v3", SizeRead(sources[1], "size", 0)),
                         ("v4", SizeRead(sources[2], "size", 0))),
                        ("s0 >= 2", "s1 >= 2", "v2 == s1", "v3 == s1", "v4 == s1"))
    pairs = {}
    for size in sizes:
        frame = dict(zip(names, _inputs(size)))
        static, symbolic = GuardSet(), GuardSet()
        for source, free in zip(sources, (((0, 1), (0,)), ((0,), ()), ((0,), ()))):
            static.add(TensorMatchGuard.of(source, frame[source.name()[3:-2]]))
            symbolic.add(TensorMatchGuard.of(source, frame[source.name()[3:-2]]).relaxed(*free))
        symbolic.add(shapes)
        checks = static.compile(), symbolic.compile()
        assert all(check(frame, {}) for check in checks)
        pairs[size] = tuple(lambda c=check, f=frame: c(f, {}) for check in checks)
    return pairs


LEVELS = {"compile_fx": _compile_fx_pair, "jit": _jit_pair, "guard": _guard_pair,
          "compile_fx_width": lambda sizes: _compile_fx_pair(sizes, (0, 1))}


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def measure(level: str, sizes: list, trials: int, clock: str = "cpu") -> list:
    """Rows (level, size, static us, symbolic us, ratio, best-trial ratio)."""
    pairs = LEVELS[level](sizes)
    rows = []
    for size, (static, symbolic) in pairs.items():
        variants = {"static": static, "symbolic": symbolic}
        for function in variants.values():
            for _ in range(20):
                function()
        counts = {name: calls_per_trial(function, budget=0.02, synchronize=_synchronize)
                  for name, function in variants.items()}
        samples = interleaved_samples(variants, trials, counts, _synchronize,
                                      clock=CLOCKS[clock])
        median = {name: statistics.median(values) * 1e6 for name, values in samples.items()}
        best = {name: min(values) * 1e6 for name, values in samples.items()}
        rows.append((level, size, median["static"], median["symbolic"],
                     median["symbolic"] / median["static"], best["symbolic"] / best["static"]))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,4,8,64")
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--levels", default="compile_fx,compile_fx_width,jit")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default=None,
                        help="cpu: the process's CPU time (steadier on a shared machine; the "
                        "default on the CPU); wall: the default on a GPU")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (the Triton path)")
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args(argv)
    torch.set_num_threads(arguments.threads)
    DEVICE["name"] = arguments.device
    clock = arguments.clock or ("cpu" if arguments.device == "cpu" else "wall")
    sizes = [int(size) for size in arguments.sizes.split(",")]
    print(f"device {arguments.device}, clock {clock}, {arguments.threads} thread(s)")
    print("| level | batch | static us | symbolic us | symbolic/static | best trials |")
    print("|---|---:|---:|---:|---:|---:|")
    for level in arguments.levels.split(","):
        for row in measure(level, sizes, arguments.trials, clock):
            print("| {} | {} | {:.1f} | {:.1f} | {:.3f} | {:.3f} |".format(*row), flush=True)


if __name__ == "__main__":
    main()
