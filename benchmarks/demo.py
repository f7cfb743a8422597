"""The README demo: compile a real model with `dynamo.jit`, print its speed and `explain()`.

    python -m benchmarks.demo [--model resnet18|bert] [--iterations N]
"""
from __future__ import annotations

import argparse

import torch

import dynamo
import guards.native
import inductor.runtime.native
from benchmarks.timing import median_seconds, timed
from benchmarks.zoo import catalog

# The demo's models in the zoo's catalog: torchvision's resnet18, and a small BertModel
# (hidden 256, 4 layers, 128 tokens: the training benchmark's CPU config).
_ENTRIES = {"resnet18": ("resnet18", {}), "bert": ("training/bert-small", {"size": 128})}


def build(name: str):
    """(model in eval mode, args, kwargs), batch 1, random weights."""
    if name not in _ENTRIES:
        raise SystemExit(f"unknown model {name!r}")
    entry, options = _ENTRIES[name]
    workload = catalog.build_workload(entry, batch=1, **options)
    return workload.model, workload.args, workload.kwargs


def median_ms(fn, iterations: int) -> float:
    return median_seconds(fn, iterations) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--backend", default="inductor")
    args = parser.parse_args()
    # both cached on disk after the first run on a machine
    _, seconds = timed(lambda: (guards.native.load(), inductor.runtime.native.empty_strided()))
    print(f"framejit's native libraries (built once per torch version, then loaded): "
          f"{seconds:.1f} s")
    torch.manual_seed(0)
    model, positional, keywords = build(args.model)
    jitted = dynamo.jit(model, backend=args.backend)
    with torch.no_grad():
        (expected, got), first_call = timed(lambda: (model(*positional, **keywords),
                                                     jitted(*positional, **keywords)))
        eager = median_ms(lambda: model(*positional, **keywords), args.iterations)
        compiled = median_ms(lambda: jitted(*positional, **keywords), args.iterations)
    same = all(torch.allclose(a, b, rtol=1e-3, atol=1e-3) for a, b in
               zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(got)))
    print(f"model {args.model}: first call (compile) {first_call:.2f} s; "
          f"eager {eager:.2f} ms, framejit {compiled:.2f} ms, speedup {eager / compiled:.2f}x; "
          f"results match eager: {same}")
    explain = getattr(dynamo, "explain", None)
    if explain is not None:
        with torch.no_grad():
            # explain() compiles again, with the demo's backend, so its compile-time line
            # times that backend (with its default, eager, the backend stage is ~0 ms)
            print(explain(model, backend=args.backend)(*positional, **keywords))


if __name__ == "__main__":
    main()
