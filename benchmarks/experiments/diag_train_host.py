"""Where the time of a compiled zoo model's training iteration goes on the GPU machine:
eager, framejit and torch.compile in one process (bf16 autocast, batch 16, the zoo's
workloads; forward, loss and backward, no optimizer step, gradients cleared after each).

Per system, interleaved trials, medians, in microseconds:
- `forward`: host time until forward and loss return (each iteration started on an idle GPU);
- `backward`: host time of `loss.backward()` after that;
- `wall`: forward, loss and backward until the GPU is done;
- `device`: CUDA time per iteration under torch.profiler;
then torch.profiler's CPU view per op (self CPU microseconds per iteration), ours against
torch.compile's, and eager's against ours.

A diagnostic, not a benchmark (the zoo's training rows are the benchmark):
    python -m benchmarks.experiments.diag_train_host --models resnet50 [--trials 10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from benchmarks.experiments.diag_host import op_profile, print_profiles, synchronize
from benchmarks.experiments.diag_kernels import training_iteration
from benchmarks.zoo.catalog import build_workload


def phases(model, workload) -> dict:
    """(forward us, backward us, wall us) of one iteration, started on an idle GPU (phases of
    one call: timestamps of its own, which benchmarks/timing.py's whole-call loops cannot
    take)."""
    synchronize()
    started = time.perf_counter()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = workload.loss(model(*workload.args, **workload.kwargs), workload.targets)
    forward = time.perf_counter()
    loss.backward()
    backward = time.perf_counter()
    synchronize()
    done = time.perf_counter()
    workload.model.zero_grad(set_to_none=True)
    return {"forward": (forward - started) * 1e6, "backward": (backward - forward) * 1e6,
            "wall": (done - started) * 1e6}


def measure(name: str, trials: int, rows: int) -> None:
    import dynamo

    workload = build_workload(name, "cuda", batch=16, training=True)
    systems = {"eager": workload.model, "jit": dynamo.jit(workload.model),
               "tc": torch.compile(workload.model)}
    for model in systems.values():
        for _ in range(3):
            phases(model, workload)
    samples: dict = {system: [] for system in systems}
    names = list(systems)
    for trial in range(trials):
        for system in names[trial % 3:] + names[:trial % 3]:
            samples[system].append(phases(systems[system], workload))
    row = {"model": name}
    for system, values in samples.items():
        row[system] = {key: round(statistics.median(value[key] for value in values), 1)
                       for key in ("forward", "backward", "wall")}

    profiles = {system: op_profile(training_iteration(workload, model))
                for system, model in systems.items()}
    print(json.dumps(row), flush=True)
    print(f"== {name}: torch.profiler CPU view per iteration, framejit (ours) and "
          f"torch.compile (tc)")
    print_profiles(profiles["jit"], profiles["tc"], rows)
    print(f"== {name}: framejit (ours) and eager (in the tc columns)")
    print_profiles(profiles["jit"], profiles["eager"], rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--rows", type=int, default=40)
    options = parser.parse_args(argv)
    for name in options.models.split(","):
        measure(name, options.trials, options.rows)


if __name__ == "__main__":
    main()
