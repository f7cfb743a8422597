"""Where the time of a training step goes: forward vs backward, library calls vs generated
kernels vs the rest (Python wrapper, autograd glue).

    PYTHONPATH=. .venv/bin/python -m benchmarks.training.breakdown --model gpt2 --threads 1

Input: a model of `benchmarks.training.run` and the compilers to compare. Output, on stdout:

1. per compiler, the median over interleaved trials of forward+loss, backward and the SGD
   step (wall time, `time.perf_counter`);
2. for `framejit` (the code generator), per compiled graph (forward, backward): time spent in
   generated C++ segments (`entry*` calls of the wrapper), in library calls and eager
   fallbacks (`extern*`), and the slowest segments and calls with their wrapper line. These
   are measured by wrapping the wrapper's globals with timers after warm-up (the wrapper's
   `call.__globals__`), which adds about a microsecond per call.

The numbers are only comparable within one run: measure on a quiet machine, and say when it
was shared.
"""
from __future__ import annotations

import argparse
import collections
import re
import statistics
import time

import torch

from benchmarks.training.run import Trainer, build


def split_times(trainers: list, trials: int) -> dict:
    """compiler -> (forward+loss, backward, optimizer) medians in seconds. Three timestamps
    inside one step split it into phases, which benchmarks/timing.py's loops (around whole
    calls) cannot; the trials interleave the compilers as timing.interleaved does."""
    samples = {trainer.compiler: ([], [], []) for trainer in trainers}
    for _ in range(trials):
        for trainer in trainers:
            trainer.optimizer.zero_grad(set_to_none=True)
            start = time.perf_counter()
            output = trainer.runner(*trainer.args, **trainer.kwargs)
            loss = trainer.loss(output, trainer.args, trainer.kwargs)
            forward = time.perf_counter()
            loss.backward()
            backward = time.perf_counter()
            trainer.optimizer.step()
            done = time.perf_counter()
            for values, value in zip(samples[trainer.compiler],
                                     (forward - start, backward - forward, done - backward)):
                values.append(value)
    return {name: tuple(statistics.median(values) for values in triple)
            for name, triple in samples.items()}


class GraphTimers:
    """Timers around the `entry*` (generated) and `extern*` (library) calls of compiled
    graphs' wrappers."""

    def __init__(self):
        self.seconds: dict = collections.defaultdict(float)
        self.sources: dict = {}

    def instrument(self, index: int, compiled) -> None:
        inner = getattr(compiled, "compiled", compiled)        # WithRebuiltViews wraps one
        run = getattr(inner, "run", None)
        namespace = getattr(run, "__globals__", None)
        if namespace is None or "call_with_argument_list" not in namespace:
            return                                              # not a generated wrapper
        self.sources[index] = inner.report.source
        for name in list(namespace):
            if name.startswith(("entry", "extern")):
                namespace[name] = self._timed((index, name), namespace[name])

    def _timed(self, key, function):
        """`function` with its time added to `key`: a timestamp pair inside the compiled
        wrapper, around one call of a kernel or library function (not a timing loop)."""
        seconds = self.seconds

        def timed(*args, **kwargs):
            start = time.perf_counter()
            result = function(*args, **kwargs)
            seconds[key] += time.perf_counter() - start
            return result
        return timed

    def report(self, steps: int, top: int) -> None:
        totals: dict = collections.defaultdict(float)
        for (index, name), seconds in self.seconds.items():
            kind = "generated" if name.startswith("entry") else "library/fallback"
            totals[(index, kind)] += seconds / steps
        for (index, kind), seconds in sorted(totals.items()):
            print(f"  graph {index}: {kind:17} {seconds * 1e3:8.1f} ms per step")
        slowest = sorted(self.seconds.items(), key=lambda item: -item[1])[:top]
        for (index, name), seconds in slowest:
            match = re.search(rf"^.*\b{name}\(.*$", self.sources.get(index, ""), re.M)
            line = match.group(0).strip()[:110] if match else ""
            print(f"  graph {index} {name:10} {seconds / steps * 1e3:7.2f} ms  {line}")


def compiled_graphs_of(step_once) -> list:
    """Run `step_once()` (the first, compiling step) and return every graph compiled by the
    training layer on the way, in order (forward, then backward)."""
    import inductor.autograd as package
    from inductor.autograd import runtime
    found, original = [], runtime.compile_graph

    def recording(*args, **kwargs):
        compiled = original(*args, **kwargs)
        found.append(compiled)
        return compiled
    runtime.compile_graph = package.compile_graph = recording
    try:
        step_once()
    finally:
        runtime.compile_graph = package.compile_graph = original
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--compilers", default="eager,framejit-aot,framejit")
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--size", type=int)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--top", type=int, default=10)
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    torch.manual_seed(0)
    model, args, kwargs, loss = build(options.model, "cpu", options.batch, options.size)
    trainers, graphs = [], []
    for compiler in options.compilers.split(","):
        trainer = Trainer(compiler, model, args, kwargs, loss, "cpu", False)
        if compiler == "framejit":
            graphs = compiled_graphs_of(trainer.step)
        for _ in range(3):
            trainer.optimizer.zero_grad(set_to_none=True)
            trainer.step()
        trainers.append(trainer)
    print(f"{options.model}, torch threads {torch.get_num_threads()}, median of "
          f"{options.trials} interleaved trials")
    for name, (forward, backward, optimizer) in split_times(trainers, options.trials).items():
        print(f"{name:14} forward+loss {forward * 1e3:8.1f} ms  backward {backward * 1e3:8.1f} "
              f"ms  optimizer {optimizer * 1e3:6.1f} ms")
    if not graphs:
        return
    timers = GraphTimers()
    for index, compiled in enumerate(graphs):
        timers.instrument(index, compiled)
    trainer = next(trainer for trainer in trainers if trainer.compiler == "framejit")
    for _ in range(options.trials):
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.step()
    print("framejit, per compiled graph (0: forward, 1: backward, ...):")
    timers.report(options.trials, options.top)


if __name__ == "__main__":
    main()
