"""Device time by kernel of a compiled zoo model on the GPU (bf16 inference, batch 16):
torch.profiler's CUDA view of 10 calls, the top kernels by total device time, for framejit
(`dynamo.jit`, default mode) and with `--torch-compile` for torch.compile too.

A diagnostic (which kernels a model's device time goes to), not a benchmark:
    python -m benchmarks.experiments.diag_kernels --models resnet50 [--torch-compile]
    python -m benchmarks.experiments.diag_kernels --models resnet50 --layouts
    python -m benchmarks.experiments.diag_kernels --models resnet50 --training

`--training`: one training iteration as the zoo times it without the optimizer (forward and
loss under bf16 autocast with float32 parameters, then backward; gradients cleared).
`--wall`: before the kernels, the median wall milliseconds per call of eager, framejit and
(with `--torch-compile`) torch.compile, two interleaved rounds, and framejit's counted
fallbacks (results: `results/h200-families-*.txt`).
"""
from __future__ import annotations

import argparse

import torch

from benchmarks.zoo.catalog import build_workload


def profile(label: str, function, rows: int) -> None:
    for _ in range(5):
        function()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(10):
            function()
        torch.cuda.synchronize()
    events = [event for event in profiler.key_averages() if event.device_time_total > 0]
    events.sort(key=lambda event: event.device_time_total, reverse=True)
    total = sum(event.device_time_total for event in events)
    print(f"== {label}: {total / 10 / 1e3:.3f} ms of device time per call, "
          f"{sum(event.count for event in events) // 10} kernels per call", flush=True)
    for event in events[:rows]:
        print(f"{event.device_time_total / 10:9.1f} us {event.count // 10:4d}x  "
              f"{event.key[:110]}", flush=True)


def main(argv=None) -> None:
    import dynamo

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--layouts", action="store_true",
                        help="only time NCHW against channels-last graphs (layout_ab)")
    parser.add_argument("--wall", action="store_true",
                        help="also wall ms per call of each compiler, and the fallbacks")
    parser.add_argument("--training", action="store_true",
                        help="AMP (bf16 autocast) forward, loss and backward instead of inference")
    options = parser.parse_args(argv)
    for name in options.models.split(","):
        if options.training:
            profile_training(name, options)
            continue
        if options.layouts:
            import json
            print(json.dumps(layout_ab(name)), flush=True)
            continue
        workload = build_workload(name, "cuda", torch.bfloat16, batch=16)
        model, args, kwargs = workload.model, workload.args, workload.kwargs
        with torch.no_grad():
            if options.wall:
                wall_times(name, model, args, kwargs, options.torch_compile)
            profile(f"{name} eager", lambda: model(*args, **kwargs), options.rows)
            dynamo.reset()
            ours = dynamo.jit(model)
            profile(f"{name} framejit", lambda: ours(*args, **kwargs), options.rows)
            if options.torch_compile:
                theirs = torch.compile(model)
                profile(f"{name} torch.compile", lambda: theirs(*args, **kwargs),
                        options.rows)


def wall_times(name: str, model, args, kwargs, with_torch_compile: bool) -> None:
    """Median wall ms per call (20 calls a trial, 5 trials), two rounds over the compilers."""
    import statistics
    import time

    import dynamo
    from inductor.runtime import fallbacks

    def wall_ms(function) -> float:
        trials = []
        for _ in range(5):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(20):
                function()
            torch.cuda.synchronize()
            trials.append((time.perf_counter() - start) / 20 * 1e3)
        return round(statistics.median(trials), 3)

    dynamo.reset()
    fallbacks.reset()
    ours = dynamo.jit(model)
    compilers = {"eager": model, "framejit": ours}
    if with_torch_compile:
        compilers["torch.compile"] = torch.compile(model)
    for compiled in compilers.values():
        for _ in range(3):
            compiled(*args, **kwargs)
    print(f"== {name}: framejit's fallbacks {fallbacks.fallbacks()}", flush=True)
    for _ in range(2):
        print(f"== {name} wall ms per call", {label: wall_ms(lambda: compiled(*args, **kwargs))
                                              for label, compiled in compilers.items()},
              flush=True)


def training_iteration(workload, function):
    """A zero-argument AMP iteration of `function` (the model or a compiled form of it):
    forward and loss under bf16 autocast, backward, gradients cleared."""
    def run():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = workload.loss(function(*workload.args, **workload.kwargs), workload.targets)
        loss.backward()
        workload.model.zero_grad(set_to_none=True)
    return run


def profile_training(name: str, options) -> None:
    import dynamo

    workload = build_workload(name, "cuda", batch=16, training=True)
    model = workload.model
    profile(f"{name} training eager", training_iteration(workload, model), options.rows)
    dynamo.reset()
    profile(f"{name} training framejit", training_iteration(workload, dynamo.jit(model)),
            options.rows)
    if options.torch_compile:
        profile(f"{name} training torch.compile",
                training_iteration(workload, torch.compile(model)), options.rows)


def layout_ab(name: str, rounds: int = 10) -> dict:
    """Wall and host time per call of the model's compiled graph with NCHW and with
    channels-last activations (config.gpu_channels_last), compiled in one process and timed
    in alternating rounds, so that the host machine's drift hits both alike."""
    import statistics

    import dynamo
    from benchmarks.experiments.diag_overhead import recording_backend, timed_calls
    from inductor.config import config

    workload = build_workload(name, "cuda", torch.bfloat16, batch=16)
    model, args, kwargs = workload.model, workload.args, workload.kwargs
    graphs = {}
    with torch.no_grad():
        for layout in (False, True):
            config.gpu_channels_last = layout
            dynamo.reset()
            recorded: list = []
            dynamo.jit(model, backend=recording_backend(recorded))(*args, **kwargs)
            graphs[layout] = recorded[0]
        config.gpu_channels_last = False
        walls = {False: [], True: []}
        enqueues = {False: [], True: []}
        for _ in range(rounds):
            for layout, (compiled, graph_args) in graphs.items():
                wall, enqueue = timed_calls(lambda: compiled(*graph_args), count=10)
                walls[layout] += wall
                enqueues[layout] += enqueue
    row = {"model": name}
    for layout, key in ((False, "nchw"), (True, "channels_last")):
        row[f"{key}_wall_ms"] = round(statistics.median(walls[layout]) * 1e3, 3)
        row[f"{key}_enqueue_ms"] = round(statistics.median(enqueues[layout]) * 1e3, 3)
    return row


if __name__ == "__main__":
    main()
