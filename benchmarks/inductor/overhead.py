"""Fixed cost per call of a compiled graph (benchmark; output: microseconds per call).

Measures, on an 8-element `x + 1` (so kernel time is nil):
- a raw ctypes call of a generated entry point with 2 data pointers;
- the compiled graph (`CompiledGraph` from `inductor.compile_fx`, no frame capture): wrapper,
  one allocation, the ctypes call;
- eager `x + 1`; `torch.compile` (inductor) and `torch.compile(backend=inductor.compile_fx)`,
  both including torch's frame capture and guards; `dynamo.jit` with our inductor (our capture).

Run: `PYTHONPATH=. python -m benchmarks.inductor.overhead`.
"""
from __future__ import annotations

import torch
import torch.fx

import inductor
from benchmarks.timing import best_per_call_us


def per_call_us(function, number: int = 20000) -> float:
    """Best of 7 repeats, in microseconds per call."""
    return best_per_call_us(function, number, repeat=7)


def add_one(x):
    return x + 1


def main() -> None:
    x = torch.randn(8)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(add_one), [x])
    out = torch.empty(8)
    from inductor.runtime import build
    entry = next(iter(build._loaded.values()))
    raw = entry.jit_entry_0
    pointers = (x.data_ptr(), out.data_ptr())
    rows = [("ctypes call of the entry point (2 pointers)", lambda: raw(*pointers)),
            ("CompiledGraph call (wrapper + allocation + entry)", lambda: compiled(x)),
            ("eager x + 1", lambda: add_one(x))]
    theirs = torch.compile(add_one, dynamic=False)
    ours = torch.compile(add_one, backend=inductor.compile_fx, dynamic=False)
    theirs(x), ours(x)
    rows += [("torch.compile (inductor)", lambda: theirs(x)),
             ("torch.compile(backend=inductor.compile_fx)", lambda: ours(x))]
    try:
        import dynamo
        jitted = dynamo.jit(add_one)
        jitted(x)
        rows.append(("dynamo.jit (our capture + our inductor)", lambda: jitted(x)))
    except Exception as error:  # noqa: BLE001  (the capture may not support this build)
        print(f"dynamo.jit skipped: {error}")
    print("| path | us per call |\n|---|---:|")
    for name, function in rows:
        print(f"| {name} | {per_call_us(function):.2f} |")


if __name__ == "__main__":
    main()
