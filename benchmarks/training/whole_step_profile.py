"""Where the time of one whole training step goes (`benchmarks.training.whole_step`'s step:
zero_grad, forward, cross entropy, backward, optimizer.step in one jitted function), framejit
next to eager and torch.compile.

    PYTHONPATH=. .venv/bin/python -m benchmarks.training.whole_step_profile --model cnn
    PYTHONPATH=. .venv/bin/python -m benchmarks.training.whole_step_profile --model gpt2 \\
        --modes eager,jit --ops 30

Input: a case of `whole_step.cases` (quick sizes) and the modes to compare. Output, on stdout:

1. per mode, the median over interleaved trials of the step's wall time and of its thread CPU
   time (`time.thread_time`: on a shared machine, time spent waiting for a core is not
   counted, so the CPU column is the one to compare between runs);
2. for `jit`, per graph inductor compiled (forward, backward, optimizer update; a graph
   compiled again shows up twice), thread CPU time in generated C++ (`entry*` calls of the
   wrapper) and in library calls (`extern*`), and the slowest calls with their wrapper line;
3. per mode (`--ops`), the ATen operators with the most self time (torch.profiler): generated
   kernels do not show up as operators, their time is the self time of the enclosing region.

Timers wrap the wrapper's globals after warm-up (about a microsecond per call). Numbers are
comparable within one run only.
"""
from __future__ import annotations

import argparse
import collections
import copy
import functools
import os
import re
import statistics
import time

import torch

import dynamo
import inductor
from benchmarks.training import whole_step


class SegmentTimers:
    """Thread CPU time of the `entry*` (generated) and `extern*` (library) calls of compiled
    graphs' wrappers, per (graph index, name)."""

    def __init__(self):
        self.seconds: dict = collections.defaultdict(float)
        self.sources: dict = {}

    def instrument(self, index: int, compiled) -> None:
        run = getattr(compiled, "run", None)
        namespace = getattr(run, "__globals__", None)
        if namespace is None or "call_with_argument_list" not in namespace:
            return
        self.sources[index] = compiled.report.source
        addresses = {}
        for name in list(namespace):
            if name.startswith("entry") and isinstance(namespace[name], int):
                addresses[namespace[name]] = name   # called as `launch(entryN, buffers...)`
            elif name.startswith(("entry", "extern")):
                namespace[name] = self._timed((index, name), namespace[name])
        if addresses and "launch" in namespace:
            namespace["launch"] = self._timed_launch(index, addresses, namespace["launch"])

    def _timed_launch(self, index: int, addresses: dict, launch):
        """The native launcher timed per entry (its first argument: the entry's address)."""
        timed = {address: self._timed((index, name), launch)
                 for address, name in addresses.items()}

        def launch_timed(address, *args):
            return timed[address](address, *args)
        return launch_timed

    def _timed(self, key, function):
        seconds = self.seconds

        def timed(*args, **kwargs):
            start = time.thread_time()
            result = function(*args, **kwargs)
            seconds[key] += time.thread_time() - start
            return result
        return timed

    def report(self, steps: int, top: int) -> None:
        totals: dict = collections.defaultdict(float)
        for (index, name), seconds in self.seconds.items():
            kind = "generated" if name.startswith("entry") else "library"
            totals[(index, kind)] += seconds / steps
        for (index, kind), seconds in sorted(totals.items()):
            print(f"  graph {index}: {kind:9} {seconds * 1e3:8.2f} ms per step")
        slowest = sorted(self.seconds.items(), key=lambda item: -item[1])[:top]
        for (index, name), seconds in slowest:
            match = re.search(rf"^.*\b{name}[(,].*$", self.sources.get(index, ""), re.M)
            line = match.group(0).strip()[:100] if match else ""
            print(f"  graph {index} {name:9} {seconds / steps * 1e3:7.2f} ms  {line}")


def timing_phases(seconds: dict) -> None:
    """Add the thread CPU time of the training layer's forward (`TrainingVariant.__call__`:
    the compiled forward and its autograd glue), backward (`run_backward`) and forward-only
    graphs (`InferenceVariant`; the optimizer update's graph comes through
    `CompiledGraph.__call__`) to `seconds`, by phase."""
    from inductor.autograd import runtime
    from inductor.runtime.compiled_graph import CompiledGraph

    def timed(name, function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            start = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[name] += time.thread_time() - start
        return wrapper
    for owner, attribute, name in (
            (runtime.TrainingVariant, "__call__", "forward (training variant)"),
            (runtime.TrainingVariant, "run_backward", "backward"),
            (runtime.InferenceVariant, "__call__", "forward-only variant"),
            (CompiledGraph, "__call__", "compiled graph called directly")):
        setattr(owner, attribute, timed(name, getattr(owner, attribute)))


def recording_compiles(found: list):
    """Patch `inductor.pipeline.compile_aten` so every graph it compiles lands in `found`."""
    from inductor import pipeline
    original = pipeline.compile_aten

    @functools.wraps(original)   # keeps its signature: the training layer reads it
    def recording(*args, **kwargs):
        compiled = original(*args, **kwargs)
        found.append(compiled)
        return compiled
    pipeline.compile_aten = recording
    return original


def setups(case: tuple, modes: list) -> dict:
    """mode -> (step, model, optimizer), the models identical copies."""
    name, factory, _, _, optimizer_name = case
    torch.manual_seed(0)
    base = factory()
    result = {}
    for mode in modes:
        model = copy.deepcopy(base)
        optimizer = whole_step.make_optimizer(optimizer_name, model.parameters())
        step = {"jit": lambda: dynamo.jit(whole_step.train_step, backend="inductor"),
                "torch.compile": lambda: torch.compile(whole_step.train_step),
                "eager": lambda: whole_step.train_step}[mode]()
        result[mode] = (step, model, optimizer)
    return result


def interleaved(runs: dict, batch: tuple, trials: int) -> dict:
    """mode -> (median wall s, median thread CPU s) over interleaved trials."""
    samples = {mode: ([], []) for mode in runs}
    for _ in range(trials):
        for mode, (step, model, optimizer) in runs.items():
            wall, cpu = time.perf_counter(), time.thread_time()
            step(model, optimizer, *batch)
            samples[mode][1].append(time.thread_time() - cpu)
            samples[mode][0].append(time.perf_counter() - wall)
    return {mode: (statistics.median(walls), statistics.median(cpus))
            for mode, (walls, cpus) in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cnn", help="mlp, cnn or gpt2 (quick sizes)")
    parser.add_argument("--modes", default="eager,jit,torch.compile")
    parser.add_argument("--trials", type=int, default=9)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--ops", type=int, default=0, help="profiler rows per mode")
    parser.add_argument("--sources", help="folder to write each jit graph's generated code to")
    options = parser.parse_args()
    torch.set_num_threads(1)
    case = next(case for case in whole_step.cases("cpu", True)
                if case[0].startswith(options.model))
    modes = options.modes.split(",")
    found: list = []
    recording_compiles(found)
    runs = setups(case, modes)
    torch.manual_seed(1)
    batch = (case[2](), case[3]())
    fallbacks = inductor.fallbacks()
    for mode, (step, model, optimizer) in runs.items():
        start = time.perf_counter()
        for _ in range(3):
            step(model, optimizer, *batch)
        print(f"{mode}: first 3 steps {time.perf_counter() - start:.1f} s")
    print(f"{case[0]} ({case[4]}), 1 thread, median of {options.trials} interleaved trials")
    for mode, (wall, cpu) in interleaved(runs, batch, options.trials).items():
        print(f"  {mode:14} wall {wall * 1e3:8.2f} ms   thread CPU {cpu * 1e3:8.2f} ms")
    if "jit" in runs:
        print("jit:", whole_step._jit_counts(runs["jit"][0]),
              "fallbacks", whole_step._difference(inductor.fallbacks(), fallbacks),
              "backward compiles", whole_step._backward_counts())
        timers, phases = SegmentTimers(), collections.defaultdict(float)
        for index, compiled in enumerate(found):
            timers.instrument(index, compiled)
        timing_phases(phases)
        step, model, optimizer = runs["jit"]
        start = time.thread_time()
        for _ in range(options.trials):
            step(model, optimizer, *batch)
        total = (time.thread_time() - start) / options.trials
        print(f"jit: thread CPU per step {total * 1e3:.2f} ms (timers on), by phase:")
        for name, seconds in phases.items():
            print(f"  {name:32} {seconds / options.trials * 1e3:8.2f} ms")
        print(f"  {'the rest (guards, glue, eager)':32} "
              f"{(total - sum(phases.values()) / options.trials) * 1e3:8.2f} ms")
        print(f"jit: {len(found)} graphs compiled by inductor; thread CPU per segment:")
        if options.sources:
            os.makedirs(options.sources, exist_ok=True)
            for index, compiled in enumerate(found):
                with open(os.path.join(options.sources, f"graph{index}.py"), "w") as handle:
                    handle.write(compiled.report.source)
        timers.report(options.trials, options.top)
    for mode in modes[:options.ops and len(modes)]:
        step, model, optimizer = runs[mode]
        with torch.profiler.profile() as profiler:
            for _ in range(3):
                step(model, optimizer, *batch)
        print(f"===== {mode}, 3 steps")
        print(profiler.key_averages().table(sort_by="self_cpu_time_total",
                                            row_limit=options.ops))


if __name__ == "__main__":
    main()
