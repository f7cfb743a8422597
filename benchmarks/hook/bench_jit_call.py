"""The per-call split of a jitted call whose compiled code is cached (benchmark; input: nothing;
output: thread-CPU nanoseconds per call, best over interleaved rounds).

Rows, on an 8-element float32 tensor, one thread:
- `eager identity`: `return x` called directly (the loop's own cost is in every row);
- `hook, code skipped`: a `ScopedCall` with a callback, the code marked skip (installing the
  callback, the hook's decision, a call CPython no longer inlines);
- `hook hit, check None`: the same with an always-matching entry (reading `L`, the walk, the
  replacement's function object and frame);
- `dynamo.jit identity`: the whole cache hit (plus the compiled check: global state and scope);
- `eager x + 1`, `dynamo.jit x + 1 (inductor)`; with `--torch-compile` also torch.compile's
  (eager backend for the identity, inductor for `x + 1`): the anchor, never the product.

Rows alternate within each round, so a load change on a shared machine hits all of them.
Run: `PYTHONPATH=. python benchmarks/hook/bench_jit_call.py [--calls 5000] [--rounds 30]
[--torch-compile]`.
"""
from __future__ import annotations

import argparse
import time

import torch

import dynamo
from dynamo import _C, hook
from dynamo.rewrite import nop_rewrite


def identity(x):
    return x


def identity_hooked(x):
    return x


def identity_skipped(x):
    return x


def add_one(x):
    return x + 1


class Targeted:
    """A callback that answers None for `code` (which has an entry) and SKIP for the rest."""

    def __init__(self, code):
        self.code = code

    def __call__(self, view):
        return None if view.f_code is self.code else hook.SKIP


def cases(with_torch_compile: bool) -> dict:
    hook.add_entry(identity_hooked.__code__, None, nop_rewrite(identity_hooked.__code__))
    hook.mark_skip(identity_skipped.__code__)
    rows = {
        "eager identity": identity,
        "hook, code skipped": _C.ScopedCall(identity_skipped, Targeted(None)),
        "hook hit, check None": _C.ScopedCall(identity_hooked,
                                              Targeted(identity_hooked.__code__)),
        "dynamo.jit identity": dynamo.jit(identity, backend="eager"),
        "eager x + 1": add_one,
        "dynamo.jit x + 1 (inductor)": dynamo.jit(add_one, backend="inductor"),
    }
    if with_torch_compile:
        rows["torch.compile identity (eager)"] = torch.compile(identity, backend="eager")
        rows["torch.compile x + 1 (inductor)"] = torch.compile(add_one)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per timing")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds")
    parser.add_argument("--torch-compile", action="store_true")
    options = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(8)
    rows = cases(options.torch_compile)
    for name, function in rows.items():  # warm-up (compiles), checked against eager
        expected = x + 1 if "+ 1" in name else x
        for _ in range(3):
            torch.testing.assert_close(function(x), expected)
    best = dict.fromkeys(rows, float("inf"))
    for _ in range(options.rounds):
        for name, function in rows.items():
            started = time.thread_time_ns()
            for _ in range(options.calls):
                function(x)
            best[name] = min(best[name], (time.thread_time_ns() - started) / options.calls)
    for name, nanoseconds in best.items():
        print(f"{name:34s} {nanoseconds:7.0f} ns")


if __name__ == "__main__":
    main()
