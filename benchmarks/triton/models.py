"""End-to-end check of the Triton backend on the GPU zoo models (bf16 inference).

For each model (zoo catalog entries, random weights, batch 16, 128 tokens): compile through
`torch.compile(backend=inductor.compile_fx)` (default mode, then "reduce-overhead"), compare
the output with eager (relative error of the logits), and time eager, ours and, with
`--torch-compile`, torch.compile's inductor. The lead's zoo runs the reported model numbers;
this script answers whether `inductor.compile_fx` handles the models on CUDA, and roughly
how fast.

    python -m benchmarks.triton.models [--models resnet50,gpt2-base] [--torch-compile]
        [--output rows.jsonl]
"""
from __future__ import annotations

import argparse
import json
import traceback

import torch

from benchmarks.timing import cuda_event_seconds, timed
from benchmarks.zoo.catalog import build_workload

MODELS = ("resnet50", "mobilenet_v3_large", "vit_b_16", "bert-base", "gpt2-base", "t5-small")


def logits(output) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    for key in ("logits", "last_hidden_state"):
        value = getattr(output, key, None)
        if isinstance(value, torch.Tensor):
            return value
    return output[0]


def relative_error(actual, expected) -> float:
    actual, expected = logits(actual).float(), logits(expected).float()
    return float((actual - expected).norm() / expected.norm().clamp_min(1e-12))


def backend(mode):
    import inductor

    def compile_graph(gm, example_inputs):
        compiled = inductor.compile_fx(gm, example_inputs, mode=mode)
        backend.reports.append(compiled.report)
        return compiled
    return compile_graph


backend.reports = []


def check(name: str, with_torch_compile: bool) -> dict:
    workload = build_workload(name, "cuda", torch.bfloat16, batch=16)
    model, args, kwargs = workload.model, workload.args, workload.kwargs

    def run(function):
        return lambda: function(*args, **kwargs)
    row = {"model": name}
    with torch.no_grad():
        expected = model(*args, **kwargs)
        row["eager_ms"] = cuda_event_seconds(lambda: model(*args, **kwargs), [()]) * 1e3
        for mode in (None, "reduce-overhead"):
            torch._dynamo.reset()
            backend.reports.clear()
            compiled = torch.compile(model, backend=backend(mode), dynamic=False)
            actual, seconds = timed(run(compiled), torch.cuda.synchronize)
            key = mode or "default"
            row[f"{key}_compile_s"] = round(seconds, 1)
            row[f"{key}_error"] = relative_error(actual, expected)
            row[f"{key}_ms"] = cuda_event_seconds(run(compiled), [()]) * 1e3
            row[f"{key}_graphs"] = len(backend.reports)
            row[f"{key}_summary"] = "; ".join(report.summary() for report in backend.reports)
        if with_torch_compile:
            torch._dynamo.reset()
            theirs = torch.compile(model, mode="reduce-overhead", dynamic=False)
            row["torch_compile_compile_s"] = round(
                timed(run(theirs), torch.cuda.synchronize)[1], 1)
            row["torch_compile_ms"] = cuda_event_seconds(run(theirs), [()]) * 1e3
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--torch-compile", action="store_true")
    parser.add_argument("--output", default=None)
    options = parser.parse_args(argv)
    for name in options.models.split(","):
        try:
            row = check(name, options.torch_compile)
        except Exception as error:  # noqa: BLE001  (report and go on with the next model)
            traceback.print_exc()
            row = {"model": name, "failed": f"{type(error).__name__}: {str(error)[:500]}"}
        print(json.dumps(row), flush=True)
        if options.output:
            with open(options.output, "a") as handle:
                handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
