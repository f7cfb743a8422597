"""Per-call cost of a graph compiled once over symbolic sizes against one compiled per size.

Input: the sweep's function (`subjects.pointwise_reduction`, width 512) at a few batch sizes
(small ones, where the per-call Python path dominates). Output: a table of median (and best)
microseconds per call for each level, interleaved trials (the machine may be loaded):
- `compile_fx`: `inductor.compile_fx` of a static graph per size against one symbolic graph
  (batch dim symbolic, as the front end hands it), called straight; `compile_fx_width`: the
  width symbolic too (as `dynamic=True` makes every dim);
- `jit`: `dynamo.jit(dynamic=False)` (one entry per size) against `dynamo.jit(dynamic=True)`,
  the whole path a user gets (guards, the frame hook, the compiled graph); each wraps its own
  copy of the function's code (`variants.own_code`, as the sweep does), so both guard the same
  frame (a lambda calling the function, as this level once used for the dynamic side only,
  adds the inlined call's guards to one side: ~0.3 us on the 2-core VM);
- `check` and `graph` (not in the default levels): the two parts of `jit`'s path that differ,
  taken from the entries `jit` installs: the entry's check alone (called with the frame's
  locals and globals; its condition on the calling `dynamo.jit` compares the wrapper with
  itself, the callback being installed only during a jitted call), and the compiled graph
  alone (what the backend returned, called straight); `jit` minus these two is the hook, the
  glue and the calls between them, the same code for both;
- `guard` (not in the default levels): the guard check alone, exact tensor sizes against free
  ones plus the shape relations `jit` learns for this function.
Times are the process's CPU time by default (`--clock cpu`): on a machine shared with other
jobs, wall time mostly measures them. `--device cuda` runs the same levels on a GPU (the
Triton wrapper: sizes bound per call, grids computed from them, size arguments to each
launch); its default clock is wall time, synchronized once per trial, not per call, so small
batches measure the host's enqueueing, the per-call cost that differs between the two.
`--threads`: CPU threads for torch and the C++ kernels (1 by default, as the sweep).

    python -m benchmarks.dynamic.overhead [--sizes 2,4,8,64] [--trials 15]
        [--levels compile_fx,compile_fx_width,jit,check,graph,guard]
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


def _jitted(dynamic: bool, backend=None) -> tuple:
    """(function, its `dynamo.jit`): the function over its own copy of the code."""
    import dynamo
    from benchmarks.dynamic.variants import own_code

    function = own_code(pointwise_reduction, "dynamic" if dynamic else "static")
    options = {} if backend is None else {"backend": backend}
    return function, dynamo.jit(function, dynamic=dynamic, **options)


def _jit_pair(sizes: list) -> dict:
    """{size: (static callable, dynamic callable)} over dynamo.jit."""
    import dynamo

    (_, static), (_, dynamic) = _jitted(False), _jitted(True)
    dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, len(sizes) + 2)
    pairs = {}
    for size in sizes:
        inputs = _inputs(size)
        expected = pointwise_reduction(*inputs)
        for compiled in (static, dynamic):
            torch.testing.assert_close(compiled(*inputs), expected)
        pairs[size] = (lambda i=inputs: static(*i), lambda i=inputs: dynamic(*i))
    return pairs


def _entry_parts(function, jitted, inputs: list, graphs: list) -> tuple:
    """(check, graph) of the entry `jitted` runs for `inputs`: its check, standing alone
    (the condition on the calling `dynamo.jit` compares the wrapper's reference with itself),
    and a call of the compiled graph the backend returned for it (the last of `graphs`, as
    (graph, positions): which of the function's arguments each graph input is)."""
    import types

    from dynamo import hook

    torch.testing.assert_close(jitted(*inputs), pointwise_reduction(*inputs))
    check = hook.entries(function.__code__)[0][0]
    namespace = dict(check.__globals__)
    namespace["current_jit"] = namespace["compiled_by"]
    alone = types.FunctionType(check.__code__, namespace, check.__name__,
                               check.__defaults__, check.__closure__)
    local = dict(zip(("x", "weight", "bias"), inputs))
    if alone(local, function.__globals__) is not True:
        raise AssertionError("the entry's check fails outside the jitted call")
    graph, positions = graphs[-1]
    arguments = [inputs[position] for position in positions]
    torch.testing.assert_close(graph(*arguments)[0], pointwise_reduction(*inputs))
    return (lambda: alone(local, function.__globals__)), (lambda: graph(*arguments))


def _parts_pair(sizes: list, part: int) -> dict:
    """{size: (static part, dynamic part)}: the check (`part` 0) or the compiled graph (1)
    of the entries `jit` installs (its compile with a backend recording what it returns and
    the order of its inputs, which need not be the function's)."""
    import dynamo
    from dynamo.backends import lookup_backend

    graphs: dict = {"static": [], "dynamic": []}
    calls: list = []

    def recording(name):
        def backend(gm, example_inputs):
            positions = [next(position for position, value in enumerate(calls[-1])
                              if value is example) for example in example_inputs]
            graphs[name].append((lookup_backend("inductor")(gm, example_inputs), positions))
            return graphs[name][-1][0]
        return backend

    static_function, static = _jitted(False, recording("static"))
    dynamic_function, dynamic = _jitted(True, recording("dynamic"))
    dynamo.config.recompile_limit = max(dynamo.config.recompile_limit, len(sizes) + 2)
    pairs = {}
    for size in sizes:
        calls.append(_inputs(size))
        sides = (_entry_parts(static_function, static, calls[-1], graphs["static"]),
                 _entry_parts(dynamic_function, dynamic, calls[-1], graphs["dynamic"]))
        pairs[size] = (sides[0][part], sides[1][part])
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
          "compile_fx_width": lambda sizes: _compile_fx_pair(sizes, (0, 1)),
          "check": lambda sizes: _parts_pair(sizes, 0),
          "graph": lambda sizes: _parts_pair(sizes, 1)}


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
            print("| {} | {} | {:.2f} | {:.2f} | {:.3f} | {:.3f} |".format(*row), flush=True)


if __name__ == "__main__":
    main()
