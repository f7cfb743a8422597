"""The README demo: compile a real model with `dynamo.jit` and with `torch.compile`, time both
against eager, then show a program with a graph break and its `explain()`.

    python -m benchmarks.demo [--model resnet18|bert] [--trials N] [--threads N]
                              [--no-torch-compile]

Timings are interleaved: every trial times eager, framejit and torch.compile in rotating order
(`benchmarks.timing.interleaved`), so load from other processes hits all alike; the demo
prints the median of the trials, their spread (interquartile range / median) and the machine's
load average, and says when the spread is too large to trust a ratio. Compile times are each
compiler's first call, with whatever its on-disk cache already held (a fresh machine compiles
from scratch; `docs/benchmarks.md` has cold-cache numbers).
"""
from __future__ import annotations

import argparse
import inspect
import os
import textwrap

import torch

import dynamo
import guards.native
import inductor.runtime.native
from benchmarks.timing import interleaved, load_average, timed
from benchmarks.zoo import catalog

# The demo's models in the zoo's catalog: torchvision's resnet18, and a small BertModel
# (hidden 256, 4 layers, 128 tokens: the training benchmark's CPU config).
_ENTRIES = {"resnet18": ("resnet18", {}), "bert": ("training/bert-small", {"size": 128})}
NOISY = 0.15  # a spread above this: the ratios are not to be trusted


def build(name: str):
    """(model in eval mode, args, kwargs), batch 1, random weights."""
    if name not in _ENTRIES:
        raise SystemExit(f"unknown model {name!r}")
    entry, options = _ENTRIES[name]
    workload = catalog.build_workload(entry, batch=1, **options)
    return workload.model, workload.args, workload.kwargs


def max_difference(expected, got) -> float:
    leaves = zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(got))
    return max((float((a.float() - b.float()).abs().max()) for a, b in leaves
                if isinstance(a, torch.Tensor)), default=0.0)


def compare_speed(args) -> None:
    torch.manual_seed(0)
    model, positional, keywords = build(args.model)
    variants = {"eager": model, "framejit": dynamo.jit(model, backend=args.backend)}
    if args.torch_compile:
        variants["torch.compile"] = torch.compile(model)
    calls = {name: (lambda module=module: module(*positional, **keywords))
             for name, module in variants.items()}
    with torch.no_grad():
        expected = calls["eager"]()
        print(f"model {args.model}, batch 1, {torch.get_num_threads()} threads, "
              f"load average {load_average()}")
        for name in list(variants)[1:]:
            got, seconds = timed(calls[name])
            print(f"  {name}: first call (compiles) {seconds:.1f} s, largest difference "
                  f"from eager {max_difference(expected, got):.1e}")
        results = interleaved(calls, trials=args.trials)
    print(f"  steady state, median of {args.trials} interleaved trials (spread):")
    eager = results["eager"][0]
    for name, (median, spread, _) in results.items():
        ratio = "" if name == "eager" else f", {eager / median:.2f}x eager"
        print(f"    {name:<14} {median * 1e3:8.2f} ms ({spread:.0%}){ratio}")
    spreads = [spread for _, spread, _ in results.values()]
    if max(spreads) > NOISY:
        print(f"  (a spread above {NOISY:.0%}: the machine is busy, these ratios are rough; "
              f"load average {load_average()})")


def scaled_by_peak(x, w):
    y = torch.relu(x @ w)
    peak = y.abs().max().item()   # a Python float leaves the tensor world: a graph break
    return y / peak


def scaled_by_peak_tensor(x, w):
    y = torch.relu(x @ w)
    peak = y.abs().max()          # the hint applied: a 0-d tensor, no break
    return y / peak


def show_graph_break() -> None:
    x, w = torch.randn(16, 32), torch.randn(32, 8)
    print("\na program with a graph break:\n")
    print(textwrap.indent(inspect.getsource(scaled_by_peak), "    "))
    report = dynamo.explain(dynamo.jit(scaled_by_peak))(x, w)
    print(str(report).replace(os.path.dirname(os.path.abspath(__file__)) + os.sep, ""))
    torch.testing.assert_close(report.output, scaled_by_peak(x, w))
    print("\nwith the hint applied:\n")
    print(textwrap.indent(inspect.getsource(scaled_by_peak_tensor), "    "))
    fixed = dynamo.explain(dynamo.jit(scaled_by_peak_tensor))(x, w)
    print(str(fixed).split("\n")[0])
    torch.testing.assert_close(fixed.output, scaled_by_peak(x, w))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18", choices=sorted(_ENTRIES))
    parser.add_argument("--trials", type=int, default=21)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch's intra-op threads (default: torch's choice); 1 is steadier "
                             "on a shared machine, where waiting threads make every variant slow")
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    # both cached on disk after the first run on a machine
    _, seconds = timed(lambda: (guards.native.load(), inductor.runtime.native.empty_strided()))
    print(f"framejit demo, torch {torch.__version__}; native helpers ready in {seconds:.1f} s "
          f"(built once per machine and torch version, then loaded)")
    compare_speed(args)
    show_graph_break()


if __name__ == "__main__":
    main()
