"""Where a compiled model's time goes on the GPU in the default mode: the host side (Python
wrapper, launchers, library calls) against the device side.

For each model (bf16 inference, batch 16, the zoo's workloads), through `dynamo.jit`:
- `wall_ms`: a synchronized call, median of 30;
- `enqueue_ms`: the host time of one call without synchronizing (the GPU queue is deep enough
  not to block), median of 30 after a synchronize each;
- `reduce-overhead_wall_ms`: the same graph in `mode="reduce-overhead"` (CUDA graph: close to
  device time only);
- with `--torch-compile`, torch.compile's default mode timed the same way;
- `graph_enqueue_ms`: the host time of the compiled graph alone, called directly with the
  arguments `dynamo.jit` passed it (so the rest of `enqueue_ms` is the frame hook, guards and
  argument gathering);
- the top functions by own time under cProfile over 20 direct calls of the graph (with
  `--profile`; a profiler switches the frame hook off, so the graph is called directly).

If `enqueue_ms` is close to `wall_ms` and well above `replay_ms`, the host side is the limit.

    python -m benchmarks.experiments.diag_overhead [--models bert-base,resnet50] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time

import torch

from benchmarks.timing import seconds_per_call
from benchmarks.zoo.catalog import build_workload

MODELS = ("resnet50", "mobilenet_v3_large", "vit_b_16", "bert-base", "gpt2-base", "t5-small")


def _median_ms(samples: list) -> float:
    return round(statistics.median(samples) * 1e3, 3)


def recording_backend(graphs: list):
    """A `dynamo.jit` backend that compiles with inductor and keeps (compiled, last args)."""
    import inductor

    def backend(gm, example_inputs):
        compiled = inductor.compile_fx(gm, example_inputs)
        entry = [compiled, None]
        graphs.append(entry)

        def run(*args):
            entry[1] = args
            return compiled(*args)
        return run
    return backend


def timed_calls(call, count: int = 30) -> tuple[list, list]:
    """(wall seconds, host enqueue seconds) of `count` calls of `call`, each started on an
    idle GPU and synchronized after: two timestamps per call (enqueued, then done), which
    benchmarks/timing.py's loops (one span per batch) cannot take."""
    walls, enqueues = [], []
    for _ in range(count):
        torch.cuda.synchronize()
        started = time.perf_counter()
        call()
        enqueues.append(time.perf_counter() - started)
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - started)
    return walls, enqueues


def profile_graph(name: str, compiled, args) -> dict:
    """Host time of direct graph calls, and a cProfile listing of 20 of them."""
    _walls, enqueues = timed_calls(lambda: compiled(*args))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        compiled(*args)
    profiler.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
    print(f"== {name} graph called directly, 20 calls, by own time", flush=True)
    print(text.getvalue()[-7000:], flush=True)
    return {"graph_enqueue_ms": _median_ms(enqueues)}


def measure(name: str, profile: bool, with_torch_compile: bool = False) -> dict:
    import dynamo

    workload = build_workload(name, "cuda", torch.bfloat16, batch=16)
    model, args, kwargs = workload.model, workload.args, workload.kwargs
    row = {"model": name}
    with torch.no_grad():
        for mode in (None, "reduce-overhead"):
            dynamo.reset()
            graphs: list = []
            compiled = dynamo.jit(model, mode=mode) if mode else \
                dynamo.jit(model, backend=recording_backend(graphs))
            for _ in range(5):
                compiled(*args, **kwargs)
            walls, enqueues = timed_calls(lambda: compiled(*args, **kwargs))
            key = mode or "default"
            row[f"{key}_wall_ms"] = _median_ms(walls)
            row[f"{key}_enqueue_ms"] = _median_ms(enqueues)
            if profile and mode is None and len(graphs) == 1:
                row.update(profile_graph(name, *graphs[0]))
        if with_torch_compile:
            torch._dynamo.reset()
            theirs = torch.compile(model)
            for _ in range(5):
                theirs(*args, **kwargs)
            walls, enqueues = timed_calls(lambda: theirs(*args, **kwargs))
            row["torch_compile_wall_ms"] = _median_ms(walls)
            row["torch_compile_enqueue_ms"] = _median_ms(enqueues)
        seconds = seconds_per_call(lambda: model(*args, **kwargs), 30, torch.cuda.synchronize)
        row["eager_ms"] = round(seconds * 1e3, 3)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--torch-compile", action="store_true",
                        help="also time torch.compile's default mode the same way")
    options = parser.parse_args(argv)
    for name in options.models.split(","):
        print(json.dumps(measure(name, options.profile, options.torch_compile)), flush=True)


if __name__ == "__main__":
    main()
