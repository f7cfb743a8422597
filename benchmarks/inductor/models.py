"""Model benchmarks: eager vs torch.compile (inductor) vs framejit's inductor, inference.

Input: model names (default: the torchvision and transformers models of the capture issue)
and batch sizes. Output: a markdown table (milliseconds per call, speedup over eager for both
compilers, compile seconds) and JSON lines under `benchmarks/inductor/results/`.

Each (model, batch) runs in its own process with empty compiler caches. Both compilers see
the same FX graphs: ours runs as `torch.compile(model, backend=inductor.compile_fx)`.
Models are built from configs with random weights by the zoo's catalog (`build`), in eval
mode, under `torch.no_grad()`.

Run: `PYTHONPATH=. python -m benchmarks.inductor.models [--batch 1 8] [--models resnet18 ...]`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

TORCHVISION = ["resnet18", "mobilenet_v3_large", "vit_b_16", "convnext_tiny", "swin_t"]
TRANSFORMERS = ["bert", "gpt2", "t5", "llama", "distilbert", "vit"]


def build(name: str, batch: int):
    """(model, args, kwargs) with random weights, from the zoo's catalog: the torchvision
    models are the zoo's own entries, the transformers ones its `default/` entries
    (transformers' default-size configs, `benchmarks/zoo/variants.py`)."""
    from benchmarks.zoo import catalog
    entry = f"default/{name}" if name in TRANSFORMERS else name
    workload = catalog.build_workload(entry, batch=batch)
    return workload.model, workload.args, workload.kwargs


def _first_tensor(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    if isinstance(value, dict):     # torchvision's segmentation models: {"out": ...}
        value = tuple(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def measure(name: str, batch: int, trials: int) -> dict:
    """Run in a fresh process: compile both ways, check, time interleaved."""
    from benchmarks.timing import fresh_caches
    fresh_caches()
    import torch

    import inductor
    from benchmarks.timing import interleaved, load_average, timed

    model, args, kwargs = build(name, batch)
    model.eval()
    with torch.no_grad():
        theirs = torch.compile(model, dynamic=False)
        ours = torch.compile(model, backend=inductor.compile_fx, dynamic=False)
        expected = _first_tensor(model(*args, **kwargs))
        _, their_compile = timed(lambda: theirs(*args, **kwargs))
        result, our_compile = timed(lambda: ours(*args, **kwargs))
        error = (_first_tensor(result) - expected).abs().max().item()
        scale = expected.abs().max().item() or 1.0
        times = interleaved({"eager": lambda: model(*args, **kwargs),
                             "torch.compile": lambda: theirs(*args, **kwargs),
                             "framejit": lambda: ours(*args, **kwargs)},
                            trials=trials, warmup=2)
    return {"model": name, "batch": batch, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "eager_ms": times["eager"][0] * 1e3,
            "torch_compile_ms": times["torch.compile"][0] * 1e3,
            "framejit_ms": times["framejit"][0] * 1e3,
            "eager_best_ms": times["eager"][2] * 1e3,
            "torch_compile_best_ms": times["torch.compile"][2] * 1e3,
            "framejit_best_ms": times["framejit"][2] * 1e3,
            "noise": max(spread for _median, spread, _best in times.values()),
            "torch_compile_compile_s": their_compile, "framejit_compile_s": our_compile,
            "max_error_relative": error / scale, "load": load_average()}


def table(rows: list) -> str:
    lines = ["| model | batch | eager ms | torch.compile | framejit | best-trial speedups "
             "(tc / ours) | compile s (tc / ours) | noise |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | {row['batch']} | failed: {row['error'][:60]} "
                         f"| | | | | |")
            continue
        theirs = row["eager_ms"] / row["torch_compile_ms"]
        ours = row["eager_ms"] / row["framejit_ms"]
        best_theirs = row["eager_best_ms"] / row["torch_compile_best_ms"]
        best_ours = row["eager_best_ms"] / row["framejit_best_ms"]
        lines.append(f"| {row['model']} | {row['batch']} | {row['eager_ms']:.1f} | "
                     f"{theirs:.2f}x | {ours:.2f}x | {best_theirs:.2f}x / {best_ours:.2f}x | "
                     f"{row['torch_compile_compile_s']:.1f} / {row['framejit_compile_s']:.1f} | "
                     f"{row['noise']:.0%} |")
    good = [row for row in rows if "error" not in row]
    if good:
        def geomean(values):
            return math.exp(sum(math.log(value) for value in values) / len(values))
        theirs = geomean([row["eager_ms"] / row["torch_compile_ms"] for row in good])
        ours = geomean([row["eager_ms"] / row["framejit_ms"] for row in good])
        best_theirs = geomean([row.get("eager_best_ms", row["eager_ms"]) /
                               row.get("torch_compile_best_ms", row["torch_compile_ms"])
                               for row in good])
        best_ours = geomean([row.get("eager_best_ms", row["eager_ms"]) /
                             row.get("framejit_best_ms", row["framejit_ms"]) for row in good])
        lines.append(f"| geomean | | | {theirs:.2f}x | {ours:.2f}x | {best_theirs:.2f}x / "
                     f"{best_ours:.2f}x | | |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=TORCHVISION + TRANSFORMERS)
    parser.add_argument("--batch", nargs="*", type=int, default=[1, 8])
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "BATCH"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        row = measure(options.worker[0], int(options.worker[1]), options.trials)
        print("RESULT " + json.dumps(row), flush=True)
        return
    rows = []
    directory = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(directory, exist_ok=True)
    output = os.path.join(directory, f"models-{time.strftime('%Y%m%d-%H%M')}.jsonl")
    for name in options.models:
        for batch in options.batch:
            command = [sys.executable, "-m", "benchmarks.inductor.models", "--worker", name,
                       str(batch), "--trials", str(options.trials)]
            try:
                completed = subprocess.run(command, capture_output=True, text=True,
                                           timeout=options.timeout)
                lines = [line for line in completed.stdout.splitlines()
                         if line.startswith("RESULT ")]
                row = json.loads(lines[-1][7:]) if lines else \
                    {"model": name, "batch": batch, "error": completed.stderr[-300:]}
            except subprocess.TimeoutExpired:
                row = {"model": name, "batch": batch, "error": "timeout"}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            with open(output, "a") as handle:
                handle.write(json.dumps(row) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
