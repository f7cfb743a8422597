"""One zoo model, every compiler in one process: the per-family comparison (benchmark).

Input: zoo model names (`benchmarks/zoo/catalog.py`: `llama`, `mistral`, `t5`, ... in their
small configs), a batch size, trials. Output: per model a markdown table (median process
CPU milliseconds per call, the trials' spread, the best trial, and the median over trials of
eager time / compiled time within a trial) and one JSON line per model under
`benchmarks/inductor/results/family-*.jsonl`.

The zoo runs each compiler in its own process, against its own eager trials; this runs
them side by side in one process, interleaved (rotating order per trial), one torch thread,
timed with `time.process_time` (CPU time: a descheduled process on the shared 2-core
machine is not charged), so that the rows of one model compare with each other:

    eager                  the model as is
    torch.compile          the anchor (default mode, dynamic=False)
    framejit               dynamo.jit(model): our capture, our inductor (as the zoo runs it)
    framejit-inductor      torch.compile(model, backend=inductor.compile_fx): torch's
                           capture, our inductor (isolates the generated code from capture
                           and guard costs)

Every compiled result is checked against eager's before timing. `--training` times a whole
training step instead (the zoo's: forward, loss, backward, an SGD step with lr 1e-4 on the
shared parameters, dropout off), each variant's loss and gradients checked against eager's
first.

Run: `PYTHONPATH=. python -m benchmarks.inductor.family llama [mistral t5] [--batch 1]
[--trials 15] [--training]`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _first_tensor(value):
    from benchmarks.inductor.models import _first_tensor as first
    return first(value)


def _variants(model, args, kwargs, names: list) -> dict:
    """{name: zero-argument callable}, each compiled and checked against eager."""
    import torch

    import dynamo
    import inductor
    makers = {
        "eager": lambda: model,
        "torch.compile": lambda: torch.compile(model, dynamic=False),
        "framejit": lambda: dynamo.jit(model),
        "framejit-inductor": lambda: torch.compile(model, backend=inductor.compile_fx,
                                                   dynamic=False),
    }
    expected = _first_tensor(model(*args, **kwargs))
    variants, errors = {}, {}
    for name in names:
        compiled = makers[name]()
        result = _first_tensor(compiled(*args, **kwargs))
        errors[name] = (result - expected).abs().max().item()
        variants[name] = lambda compiled=compiled: compiled(*args, **kwargs)
    scale = expected.abs().max().item() or 1.0
    for name, error in errors.items():
        if error > 1e-4 * scale:
            raise AssertionError(f"{name} differs from eager by {error} (scale {scale})")
    return variants


def _training_variants(workload, names: list) -> dict:
    """{name: zero-argument training step}, each one's loss and gradients (of a first step
    without the optimizer) checked against eager's."""
    import torch

    import dynamo
    model = workload.model
    makers = {"eager": lambda: model,
              "torch.compile": lambda: torch.compile(model, dynamic=False),
              "framejit": lambda: dynamo.jit(model)}
    parameters = list(model.parameters())
    optimizer = torch.optim.SGD(parameters, lr=1e-4)

    def loss_and_gradients(function):
        loss = workload.loss(function(*workload.args, **workload.kwargs), workload.targets)
        loss.backward()
        gradients = [torch.zeros_like(p) if p.grad is None else p.grad.clone()
                     for p in parameters]
        model.zero_grad(set_to_none=True)
        return loss.detach(), gradients

    expected_loss, expected = loss_and_gradients(model)
    variants = {}
    for name in names:
        compiled = makers[name]()
        loss, gradients = loss_and_gradients(compiled)
        torch.testing.assert_close(loss, expected_loss, rtol=1e-3, atol=1e-4,
                                   msg=lambda text, name=name: f"{name} loss: {text}")
        # relative to the norm of all gradients together: summation order moves single
        # elements, and tiny gradients by more than their own norm (torch.compile's
        # ResNet-18: 2.6e-3 of the first convolution's norm; MobileNetV3: 3x of a gradient
        # of norm ~0); above 1e-2 is an error
        worst = float(torch.cat([(g - r).flatten() for g, r in zip(gradients, expected)]).norm()
                      / torch.cat([r.flatten() for r in expected]).norm().clamp_min(1e-12))
        print(f"{name}: gradients within {worst:.1e} of eager's (relative norm)",
              file=sys.stderr)
        if worst > 1e-2:
            raise AssertionError(f"{name}: gradients differ from eager's by {worst:.2e} "
                                 "of their norm")

        def train(compiled=compiled):
            loss = workload.loss(compiled(*workload.args, **workload.kwargs),
                                 workload.targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        variants[name] = train
    return variants


def measure(name: str, batch: int, trials: int, names: list, training: bool = False) -> dict:
    """Compile, check and time every variant of `names` on zoo model `name`."""
    import contextlib

    import torch

    from benchmarks.timing import calls_per_trial, fresh_caches, interleaved_samples, \
        load_average
    from benchmarks.zoo import catalog
    fresh_caches()
    torch.set_num_threads(1)
    workload = catalog.build_workload(name, batch=batch, training=training)
    with contextlib.nullcontext() if training else torch.no_grad():
        variants = (_training_variants(workload, names) if training else
                    _variants(workload.model, workload.args, workload.kwargs, names))
        for function in variants.values():
            for _ in range(3):
                function()
        counts = {key: calls_per_trial(function, budget=0.3)
                  for key, function in variants.items()}
        samples = interleaved_samples(variants, trials, counts, clock=time.process_time)
    eager = samples.get("eager")
    rows = {}
    for key, values in samples.items():
        quartiles = statistics.quantiles(values, n=4)
        median = statistics.median(values)
        row = {"ms": median * 1e3, "best_ms": min(values) * 1e3,
               "spread": (quartiles[2] - quartiles[0]) / median}
        if eager is not None:
            row["speedup"] = statistics.median(e / v for e, v in zip(eager, values))
        rows[key] = row
    return {"model": name, "batch": batch, "trials": trials, "threads": 1,
            "mode": "training" if training else "inference",
            "clock": "process_time", "load": load_average(), "rows": rows,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def table(result: dict) -> str:
    """Markdown rows of one model's result."""
    lines = [f"{result['model']} {result.get('mode', 'inference')} batch {result['batch']}, "
             f"{result['trials']} trials, "
             f"load {result['load']}", "",
             "| compiler | CPU ms | best | spread | speedup over eager |",
             "|---|---:|---:|---:|---:|"]
    for key, row in result["rows"].items():
        lines.append(f"| {key} | {row['ms']:.2f} | {row['best_ms']:.2f} | "
                     f"{row['spread'] * 100:.0f}% | {row.get('speedup', 1.0):.3f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="+")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--trials", type=int, default=15)
    parser.add_argument("--compilers", default="eager,torch.compile,framejit,framejit-inductor")
    parser.add_argument("--label", default="")
    parser.add_argument("--training", action="store_true",
                        help="time a training step (forward, loss, backward, SGD)")
    arguments = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    output = RESULTS / f"family-{time.strftime('%Y%m%d-%H%M')}.jsonl"
    for name in arguments.models:
        result = measure(name, arguments.batch, arguments.trials,
                         arguments.compilers.split(","), arguments.training)
        result["label"] = arguments.label
        with open(output, "a") as handle:
            handle.write(json.dumps(result) + "\n")
        print(table(result), flush=True)
        print(file=sys.stderr)


if __name__ == "__main__":
    main()
