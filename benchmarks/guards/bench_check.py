"""Cache-hit cost of a compiled guard check (benchmark; input: nothing; output: a table of
microseconds per call).

For 1, 5 and 20 tensor arguments and for an `nn.Module` with 50 parameters it measures, in one
process and on the same inputs:

- `eager x+1`: one eager tensor op, the unit the project's targets are stated in;
- `eager fn`: the benchmarked function called eagerly;
- `torch.compile fn`: the same function under `torch.compile(backend="eager")`, a cache hit, so
  `torch.compile fn - eager fn` is torch.compile's fixed cost per call (guards + frame hook);
- `guards check`: our compiled `check(L, G)` on a prebuilt frame view (guards alone; tensors
  through the native matcher, or Python conditions with `JIT_NATIVE_GUARDS=0`);
- `check + L`: the same including building `L` from the arguments, as the frame hook will.

Run: `PYTHONPATH=. python benchmarks/guards/bench_check.py [--no-torch-compile] [--profile]`.
The whole cache hit (hook, check, glue) is measured by `bench_cache_hit.py`.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats

import torch

import guards
from benchmarks.timing import best_per_call_us

REPEATS = 7


def per_call_us(function, number: int) -> float:
    """Best-of-REPEATS microseconds per call of `function()`."""
    return best_per_call_us(function, number, REPEATS)


def tensor_function(count: int):
    """A function of `count` tensors that touches every argument, and its arguments."""
    names = [f"x{index}" for index in range(count)]
    source = (f"def fn({', '.join(names)}):\n"
              f"    return {' + '.join(names)} + 1\n")
    namespace: dict = {}
    exec(source, namespace)
    return namespace["fn"], names, [torch.randn(8, 8) for _ in names]


def module_function():
    """A function reading every parameter of a 25-layer model (50 parameters).

    It reads only their sizes, so the captured graph is one `x + n`: torch.compile still guards
    every parameter, and the eager function stays cheap enough to see the fixed cost.
    """
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(25)])

    def fn(self, x):
        total = 0
        for layer in self:
            total += layer.weight.shape[0] + layer.bias.shape[0]
        return x + total

    return fn, ["self", "x"], [model, torch.randn(8, 8)]


def build_check(names, args):
    guard_set = guards.GuardSet()
    for name, value in zip(names, args):
        guard_set.extend(guards.install_for(value, guards.LocalSource(name)))
    guard_set.add(guards.GlobalStateGuard())
    return guard_set, guard_set.compile()


def measure(label, fn, names, args, with_torch_compile: bool) -> dict:
    guard_set, check = build_check(names, args)
    frame, globals_ = dict(zip(names, args)), fn.__globals__
    assert check(frame, globals_), guard_set.failures(frame, globals_)
    number = 20000 if len(guard_set) < 40 else 4000
    row = {"case": label, "guards": len(guard_set)}
    row["guards check"] = per_call_us(lambda: check(frame, globals_), number)
    row["check + L"] = per_call_us(lambda: check(dict(zip(names, args)), globals_), number)
    call_number = max(number // 10, 200)
    row["eager fn"] = per_call_us(lambda: fn(*args), call_number)
    if with_torch_compile:
        compiled = torch.compile(fn, backend="eager")
        compiled(*args)
        compiled(*args)
        row["torch.compile fn"] = per_call_us(lambda: compiled(*args), call_number)
        row["torch.compile overhead"] = row["torch.compile fn"] - row["eager fn"]
    return row


def cases():
    for count in (1, 5, 20):
        yield (f"{count} tensor args", *tensor_function(count))
    yield ("module, 50 params", *module_function())


def print_table(rows, eager_add: float) -> None:
    columns = ["guards", "guards check", "check + L", "eager fn", "torch.compile fn",
               "torch.compile overhead"]
    print(f"eager x+1 on an 8x8 tensor: {eager_add:.2f} us")
    print(f"{'case':20s}" + "".join(f"{column:>24s}" for column in columns))
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            cells.append(f"{'-':>24s}" if value is None else
                         f"{value:>24d}" if isinstance(value, int) else f"{value:>21.2f} us")
        print(f"{row['case']:20s}" + "".join(cells))


def profile(fn, names, args) -> None:
    _, check = build_check(names, args)
    frame = dict(zip(names, args))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(2000):
        check(frame, {})
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the 5-tensor check")
    options = parser.parse_args()
    torch.set_num_threads(1)
    tensor = torch.randn(8, 8)
    eager_add = per_call_us(lambda: tensor + 1, 20000)
    rows = [measure(label, fn, names, args, not options.no_torch_compile)
            for label, fn, names, args in cases()]
    print_table(rows, eager_add)
    if options.profile:
        profile(*tensor_function(5))


if __name__ == "__main__":
    main()
