"""Capture time per model and the cost per call on the cache-hit path (benchmark; input: the
eleven models of issue 4; output: `benchmarks/capture/results.json` and `results.md`).

For each model, in one process and under `torch.no_grad()`:

- capture: the first call through `dynamo.jit(model, backend="eager")` minus one eager call
  (so it is the cost of tracing, guards, glue and installing; the eager backend compiles
  nothing), next to the same for `torch.compile(model, backend="eager")`; the median of
  `--trials` cold starts (`dynamo.reset()` / `torch._dynamo.reset()` before each). Our
  trace-stage seconds, graph count and op count come from the compile record.
- cache hit: median microseconds per call of eager, ours and torch.compile's over
  `--repeats` timing runs, and the overhead of each over eager. The models are small, so the
  per-call overhead is visible next to the forward; `x + 1` measures the fixed cost alone.

Run: `PYTHONPATH=. .venv/bin/python -m benchmarks.capture.bench_capture [--models a,b]`.
The machine is a shared 2-core VM: medians, and `--threads 1` by default.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import textwrap
from typing import Callable

import torch

from benchmarks.timing import median_per_call_us, median_seconds, timed
from benchmarks.zoo import catalog

HERE = os.path.dirname(os.path.abspath(__file__))
# The eleven models: the catalog's `tiny/` entries (benchmarks/zoo/variants.py).
MODELS = tuple(name.split("/", 1)[1] for name in catalog.names("tiny"))


def build(name: str):
    """(model in eval mode, call(target) running `target` on the model's inputs)."""
    workload = catalog.build_workload(f"tiny/{name}")
    return workload.model, lambda target: target(*workload.args, **workload.kwargs)


def _seconds(function: Callable) -> float:
    return timed(function)[1]


def _counting_torch_backend(counts: dict):
    def backend(gm, example_inputs):
        counts["graphs"] += 1
        counts["ops"] += sum(1 for node in gm.graph.nodes
                             if node.op in ("call_function", "call_method", "call_module"))
        return gm.forward
    return backend


def capture_times(name: str, trials: int) -> dict:
    """Cold-start capture seconds of ours and torch.compile's (medians over `trials`)."""
    import dynamo
    model, call = build(name)
    eager = median_seconds(lambda: call(model), 3)
    ours, trace, torch_times = [], [], []
    counts = {}
    for _ in range(trials):
        dynamo.reset()
        counting = dynamo.CountingBackend(dynamo.backends.lookup_backend("eager"))
        jitted = dynamo.jit(model, backend=counting)
        ours.append(_seconds(lambda: call(jitted)) - eager)
        records = jitted._framejit_driver.records
        trace.append(sum(record.seconds.get("trace", 0.0) for record in records))
        counts.update(graphs=counting.frame_count, ops=counting.op_count)
    torch_counts = {"graphs": 0, "ops": 0}
    for trial in range(trials):
        torch._dynamo.reset()
        torch_counts.update(graphs=0, ops=0)
        compiled = torch.compile(model, backend=_counting_torch_backend(torch_counts))
        torch_times.append(_seconds(lambda: call(compiled)) - eager)
    return {"eager_call_s": eager, "capture_s": statistics.median(ours),
            "trace_s": statistics.median(trace), "torch_capture_s": statistics.median(torch_times),
            "graphs": counts["graphs"], "ops": counts["ops"],
            "torch_graphs": torch_counts["graphs"], "torch_ops": torch_counts["ops"]}


def cache_hit_costs(target_factory: Callable, repeats: int, number: int) -> dict:
    """Median microseconds per call of eager, ours and torch.compile's (all warmed up)."""
    import dynamo
    model, call = target_factory()
    dynamo.reset()
    torch._dynamo.reset()
    jitted = dynamo.jit(model, backend="eager")
    compiled = torch.compile(model, backend="eager")
    for target in (model, jitted, compiled):
        for _ in range(3):
            call(target)
    result = {}
    for label, target in (("eager", model), ("ours", jitted), ("torch", compiled)):
        result[f"{label}_us"] = median_per_call_us(lambda: call(target), number, repeats)
    result["ours_overhead_us"] = result["ours_us"] - result["eager_us"]
    result["torch_overhead_us"] = result["torch_us"] - result["eager_us"]
    return result


def _model_target(name: str):
    return lambda: build(name)


def _add_one_target():
    x = torch.randn(8)

    def add_one(t):
        return t + 1
    return add_one, lambda target: target(x)


def run(names: list[str], trials: int, repeats: int) -> dict:
    rows = []
    with torch.no_grad():
        for name in names:
            row = {"model": name, **capture_times(name, trials)}
            row.update(cache_hit_costs(_model_target(name), repeats, number=5))
            rows.append(row)
            print(json.dumps(row), flush=True)
        fixed = cache_hit_costs(_add_one_target, repeats, number=2000)
    return {"rows": rows, "x_plus_1": fixed, "machine": _machine(), "trials": trials,
            "repeats": repeats}


def _machine() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
            "note": "shared 2-core VM (about five engineers at work); medians"}


def markdown(results: dict) -> str:
    """The results as the table `docs/capture.md` quotes."""
    lines = ["| model | graphs (ours / torch) | ops (ours / torch) | capture s (ours / torch) "
             "| of which trace s | cache hit ms per call (eager / ours / torch) |",
             "|---|---|---|---|---|---|"]
    for row in results["rows"]:
        lines.append(
            f"| {row['model']} | {row['graphs']} / {row['torch_graphs']} | {row['ops']} / "
            f"{row['torch_ops']} | {row['capture_s']:.2f} / {row['torch_capture_s']:.2f} | "
            f"{row['trace_s']:.2f} | {row['eager_us'] / 1000:.2f} / "
            f"{row['ours_us'] / 1000:.2f} / {row['torch_us'] / 1000:.2f} |")
    fixed = results["x_plus_1"]
    machine = results["machine"]
    lines += ["", f"`x + 1` (8 floats): eager {fixed['eager_us']:.1f} us, ours "
              f"{fixed['ours_us']:.1f} us, torch.compile(backend=\"eager\") "
              f"{fixed['torch_us']:.1f} us per call.", "",
              *textwrap.wrap(f"Python {machine['python']}, torch {machine['torch']}, "
                             f"{machine['threads']} thread(s); {machine['note']}; capture: "
                             f"median of {results['trials']} cold starts; cache hit: median "
                             f"of {results['repeats']} timing runs.", 96)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default=HERE)
    options = parser.parse_args(argv)
    torch.set_num_threads(options.threads)
    results = run(options.models.split(","), options.trials, options.repeats)
    with open(os.path.join(options.output, "results.json"), "w") as handle:
        json.dump(results, handle, indent=1)
    with open(os.path.join(options.output, "results.md"), "w") as handle:
        handle.write(markdown(results))
    sys.stdout.write(markdown(results))


if __name__ == "__main__":
    main()
