"""Microbenchmarks: eager vs torch.compile (inductor) vs framejit's inductor, one process.

Input: nothing (or `--only NAME`, `--trials N`, `--dtype bfloat16`, `--device cuda`: Triton
kernels, timed with one synchronisation per trial). Output: a markdown table
(milliseconds per call, speedups over eager, compile seconds, noise) and JSON lines under
`benchmarks/inductor/results/`.

Both compilers see identical FX graphs: ours runs as `torch.compile(fn,
backend=inductor.compile_fx)`, so the frame capture (torch's) is the same on both sides and
only the code generator differs. Caches start empty (fresh directories); imports are warmed
first so compile times measure compilation, not module loading.

Run: `PYTHONPATH=. python -m benchmarks.inductor.micro`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

from benchmarks.timing import fresh_caches, interleaved, load_average, timed

CACHE_ROOT = fresh_caches()

import torch  # noqa: E402  (after the cache directories are set)

import inductor  # noqa: E402


def pointwise_chain(x, y):
    return torch.sigmoid((torch.relu(x * 2 + y) * 3 - 1))


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias)


def gelu_mlp(x, w1, b1, w2, b2):
    return torch.nn.functional.linear(torch.nn.functional.gelu(
        torch.nn.functional.linear(x, w1, b1)), w2, b2)


def sum_dim(dim):
    def reduce(x):
        return x.sum(dim)
    reduce.__name__ = f"sum_dim{dim}"
    return reduce


def t5_position_bias(table, positions):
    """T5's encoder position bias: a bucket per (query, key) pair (exact below 8, logarithmic
    up to 128 in each direction) indexing one column per head, `[1, heads, q, k]`."""
    distance = positions[None, :] - positions[:, None]
    side = (distance > 0).to(torch.long) * 16
    distance = distance.abs()
    logarithmic = 8 + (torch.log(distance.float() / 8) / math.log(128 / 8) * 8).to(torch.long)
    bucket = side + torch.where(distance < 8, distance, logarithmic.clamp(max=15))
    return table[bucket].permute(2, 0, 1).unsqueeze(0)


def cases(dtype, device="cpu"):
    """(name, function, inputs) for every microbenchmark."""
    def randn(*shape):
        return torch.randn(*shape, dtype=dtype, device=device)
    return [
        ("pointwise chain 2048x2048", pointwise_chain, (randn(2048, 2048), randn(2048, 2048))),
        ("softmax 1024x4096", softmax, (randn(1024, 4096),)),
        ("layer norm 4096x1024", layer_norm, (randn(4096, 1024), randn(1024), randn(1024))),
        ("GELU MLP 256x1024x4096", gelu_mlp, (randn(256, 1024), randn(4096, 1024), randn(4096),
                                             randn(1024, 4096), randn(1024))),
        ("sum dim 0 of 256^3", sum_dim(0), (randn(256, 256, 256),)),
        ("sum dim 1 of 256^3", sum_dim(1), (randn(256, 256, 256),)),
        ("sum dim 2 of 256^3", sum_dim(2), (randn(256, 256, 256),)),
        ("T5 position bias 128x128x4", t5_position_bias,
         (randn(32, 4), torch.arange(128, device=device))),
    ]


def warm_imports() -> None:
    """Compile a throwaway function with both compilers so imports are not timed."""
    def warm(x):
        return x.cos() + 1
    x = torch.randn(8)
    torch.compile(warm, dynamic=False)(x)
    torch.compile(warm, backend=inductor.compile_fx, dynamic=False)(x)
    torch._dynamo.reset()


def run_case(name, function, inputs, trials: int) -> dict:
    torch._dynamo.reset()
    theirs = torch.compile(function, dynamic=False)
    ours = torch.compile(function, backend=inductor.compile_fx, dynamic=False)
    with torch.no_grad():
        expected = function(*inputs)
        result, their_compile = timed(lambda: theirs(*inputs))
        mine, our_compile = timed(lambda: ours(*inputs))
        tolerance = 1e-2 if inputs[0].dtype != torch.float32 else 1e-3
        torch.testing.assert_close(mine, expected, atol=tolerance, rtol=tolerance)
        synchronize = torch.cuda.synchronize if inputs[0].is_cuda else lambda: None
        times = interleaved({"eager": lambda: function(*inputs),
                             "torch.compile": lambda: theirs(*inputs),
                             "framejit": lambda: ours(*inputs)}, trials=trials,
                            synchronize=synchronize)
    return {"case": name, "dtype": str(inputs[0].dtype).replace("torch.", ""),
            "device": inputs[0].device.type,
            "eager_ms": times["eager"][0] * 1e3,
            "torch_compile_ms": times["torch.compile"][0] * 1e3,
            "framejit_ms": times["framejit"][0] * 1e3,
            "eager_best_ms": times["eager"][2] * 1e3,
            "torch_compile_best_ms": times["torch.compile"][2] * 1e3,
            "framejit_best_ms": times["framejit"][2] * 1e3,
            "noise": max(spread for _median, spread, _best in times.values()),
            "torch_compile_compile_s": their_compile, "framejit_compile_s": our_compile,
            "load": load_average()}


def table(rows: list) -> str:
    lines = ["| case | eager ms | torch.compile ms | framejit ms | framejit vs torch.compile "
             "(median / best) | compile s (tc / ours) | noise |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = row["torch_compile_ms"] / row["framejit_ms"]
        best = row["torch_compile_best_ms"] / row["framejit_best_ms"]
        lines.append(f"| {row['case']} ({row['dtype']}) | {row['eager_ms']:.3f} | "
                     f"{row['torch_compile_ms']:.3f} | {row['framejit_ms']:.3f} | {ratio:.2f}x / "
                     f"{best:.2f}x | {row['torch_compile_compile_s']:.1f} / "
                     f"{row['framejit_compile_s']:.1f} | {row['noise']:.0%} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run cases whose name contains this")
    parser.add_argument("--trials", type=int, default=21)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: keep)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    options = parser.parse_args(argv)
    if options.threads:
        torch.set_num_threads(options.threads)
    dtype = getattr(torch, options.dtype)
    warm_imports()
    rows = []
    for name, function, inputs in cases(dtype, options.device):
        if options.only and options.only not in name:
            continue
        row = run_case(name, function, inputs, options.trials)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"threads={torch.get_num_threads()} OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} "
          f"cpu={platform.processor() or platform.machine()} "
          f"torch={torch.__version__} load={load_average()} date={time.strftime('%Y-%m-%d')}")
    print(table(rows))
    directory = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(directory, exist_ok=True)
    suffix = f"-{options.threads}thread" if options.threads else ""
    suffix += f"-{options.device}" if options.device != "cpu" else ""
    with open(os.path.join(directory, f"micro-{options.dtype}{suffix}.jsonl"), "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
