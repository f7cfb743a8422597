"""Host-side work per call of compiled transformer graphs on CPU (benchmark).

Input: zoo model names (default BERT-base and GPT-2 base), sequence lengths, a dtype and a
thread count. Output: a markdown table and JSON lines under `benchmarks/inductor/results/`:
per (model, sequence) the milliseconds per call of eager and of `dynamo.jit` (our capture
and our inductor, C++ backend), interleaved, in wall time and in CPU time (one thread: the
steadier figure on a shared machine), plus what the generated wrappers do per call
(kernel segments, library calls, `as_strided` views, allocations, result stride checks).

At batch 1 the full-size models read all their weights per call (about 0.5 GB), so their
time is memory-bound and hides the host's share. The `-narrow` variants have the same graphs
(12 layers, 12 heads, the same ops and library calls) at an eighth of the width; with 8 tokens
they leave almost no arithmetic, so their time per call is mostly the host's: the wrapper's
Python lines, ATen's dispatch of each library call, the kernels' fixed costs.

Run: `PYTHONPATH=. python -m benchmarks.inductor.host_overhead [--runs bert-base-narrow:8
gpt2-base:128 ...] [--threads 1] [--label before]`. Each run (model:tokens) is a fresh
process with empty compiler caches.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

DEFAULT_RUNS = ["bert-base-narrow:8", "gpt2-base-narrow:8", "bert-base:128", "gpt2-base:128"]
WRAPPER_COUNTS = {
    "kernel segments": r"= entry\d+\(|launch\d+\(",
    "library calls": r"= extern\d+\(|= linear\(",
    "as_strided": r"as_strided\(",
    "empty_strided": r"empty_strided\(",
    "stride checks": r"\.stride\(\)",
}


def wrapper_counts(source: str) -> dict:
    """How often each operation of `WRAPPER_COUNTS` appears in a wrapper's source."""
    wrapper = source.split("\n\ndef call(")[0]
    return {name: len(re.findall(pattern, wrapper)) for name, pattern in WRAPPER_COUNTS.items()}


def shortened(value, sequence: int):
    """`value` with every 2-D integer tensor (token ids, masks) cut to `sequence` columns."""
    import torch
    if isinstance(value, torch.Tensor) and value.dim() == 2 and not value.is_floating_point():
        return value[:, :sequence].contiguous()
    if isinstance(value, dict):
        return {key: shortened(item, sequence) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(shortened(item, sequence) for item in value)
    return value


def measure(model_name: str, sequence: int, dtype_name: str, threads: int) -> dict:
    """One (model, sequence) in this process: compile, check, time; returns a JSON row."""
    from benchmarks.timing import fresh_caches, interleaved, load_average, timed
    fresh_caches()
    import torch
    import dynamo
    import inductor
    from benchmarks.zoo.catalog import build_workload
    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    if model_name.endswith("-narrow"):
        from benchmarks.zoo import text
        size = {"hidden": 96, "layers": 12, "heads": 12, "ffn": 384, "vocab": 512}
        build = text._bert_like("BertConfig", "BertForMaskedLM", size) \
            if model_name.startswith("bert") else text._gpt2(size, positions=1024)
        torch.manual_seed(0)
        workload = build(1, False).to("cpu", dtype)
        workload.model.eval()
    else:
        workload = build_workload(model_name, "cpu", dtype, batch=1)
    args, kwargs = shortened(workload.args, sequence), shortened(workload.kwargs, sequence)
    graphs = []

    def backend(graph_module, example_inputs):
        compiled = inductor.compile_fx(graph_module, example_inputs)
        graphs.append(compiled)
        return compiled
    with torch.no_grad():
        jitted = dynamo.jit(workload.model, backend=backend)
        ours, compile_seconds = timed(lambda: jitted(*args, **kwargs))
        expected = workload.model(*args, **kwargs)
        close = _outputs_close(expected, ours, dtype)
        variants = {"eager": lambda: workload.model(*args, **kwargs),
                    "framejit": lambda: jitted(*args, **kwargs)}
        results = interleaved(variants, trials=15)
        cpu = cpu_per_call(variants, trials=15)
    counts: dict = {}
    for compiled in graphs:
        for name, count in wrapper_counts(compiled.report.source).items():
            counts[name] = counts.get(name, 0) + count
    return {"model": model_name, "sequence": sequence, "dtype": dtype_name,
            "threads": threads, "graphs": len(graphs), "matches_eager": close,
            "compile_s": round(compile_seconds, 2), "load": load_average(),
            **{f"{name}_ms": round(results[name][0] * 1e3, 3) for name in variants},
            **{f"{name}_best_ms": round(results[name][2] * 1e3, 3) for name in variants},
            **{f"{name}_spread": round(results[name][1], 3) for name in variants},
            **{f"{name}_cpu_ms": round(cpu[name] * 1e3, 3) for name in variants},
            "wrapper": counts}


def cpu_per_call(variants: dict, trials: int) -> dict:
    """{name: median CPU seconds per call} over interleaved trials. With one thread, the
    process's CPU time counts the work the call does and not the time it waited for a core,
    so it holds up better than wall time on a shared machine (memory and cache contention
    from neighbours still show)."""
    import statistics
    from benchmarks.timing import calls_per_trial, interleaved_samples
    counts = {name: calls_per_trial(function) for name, function in variants.items()}
    samples = interleaved_samples(variants, trials, counts, clock=time.process_time)
    return {name: statistics.median(values) for name, values in samples.items()}


def _outputs_close(expected, actual, dtype) -> bool:
    import torch
    import torch.utils._pytree as pytree
    tolerance = 5e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-3
    pairs = zip(pytree.tree_leaves(expected.to_tuple() if hasattr(expected, "to_tuple")
                                   else expected),
                pytree.tree_leaves(actual.to_tuple() if hasattr(actual, "to_tuple") else actual))
    return all(torch.allclose(left.float(), right.float(), atol=tolerance, rtol=tolerance)
               for left, right in pairs if isinstance(left, torch.Tensor))


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS,
                        help="model:tokens pairs (zoo names, or bert-base-narrow, "
                             "gpt2-base-narrow)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--label", default="", help="a name for this run in the results")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # model, sequence (child)
    options = parser.parse_args()
    if options.one:
        row = measure(options.one[0], int(options.one[1]), options.dtype, options.threads)
        print("ROW " + json.dumps(row))
        return
    rows = []
    for run in options.runs:
        model, sequence = run.rsplit(":", 1)
        command = [sys.executable, "-m", "benchmarks.inductor.host_overhead", "--one", model,
                   sequence, "--dtype", options.dtype, "--threads", str(options.threads)]
        finished = subprocess.run(command, capture_output=True, text=True)
        lines = [line for line in finished.stdout.splitlines() if line.startswith("ROW ")]
        if not lines:
            print(f"{run} failed:\n{finished.stderr[-2000:]}")
            continue
        row = json.loads(lines[-1][4:])
        row.update(label=options.label, commit=_commit())
        rows.append(row)
    _print_table(rows)
    _save(rows)


def _print_table(rows: list) -> None:
    print("| model | tokens | eager ms | framejit ms (best) | eager CPU ms | framejit CPU ms | "
          "matches | load | "
          + " | ".join(WRAPPER_COUNTS) + " |")
    print("|---|---:|---:|---:|---:|---:|---|---:|" + "---:|" * len(WRAPPER_COUNTS))
    for row in rows:
        counts = " | ".join(str(row["wrapper"].get(name, 0)) for name in WRAPPER_COUNTS)
        print(f"| {row['model']} | {row['sequence']} | {row['eager_ms']:.2f} | "
              f"{row['framejit_ms']:.2f} ({row['framejit_best_ms']:.2f}) | "
              f"{row['eager_cpu_ms']:.2f} | {row['framejit_cpu_ms']:.2f} | "
              f"{row['matches_eager']} | {row['load']} | {counts} |")


def _save(rows: list) -> None:
    folder = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "host-overhead.jsonl")
    with open(path, "a") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    print(f"appended {len(rows)} row(s) to {path}")


if __name__ == "__main__":
    main()
