"""CPU op sweep, timed: eager vs `dynamo.jit(fn, backend="inductor")` vs torch.compile.

Input: nothing (or `--only TEXT`: cases whose name contains it, `--sizes 64,1024`,
`--trials N`, `--no-reference`: skip torch.compile, `--clock wall`). Output: a markdown table
(microseconds per call, framejit / eager, noise, verdict) and JSON lines under
`benchmarks/inductor/results/op-sweep-timing.jsonl` (`--label` names another file).

The ops are those the correctness sweeps (`tests/inductor/test_op_sweep*.py`) cover, one
function each: unary and binary pointwise (transcendentals included), comparisons and
`where`, reductions along the last and the first dimension, softmax, layer norm, cumsum,
data movement, indirect indexing and casts, on square float32 inputs of each size (int64 and
bfloat16 and float16 where the op needs them). Every function is compiled afresh per size (sizes
specialise), with one torch thread. Trials are interleaved (rotating order) and timed by the
calling thread's CPU time by default: the machine is shared and loaded, and with one thread
all the work runs on the calling thread, so time spent descheduled is not counted. Figures
are medians over trials; `noise` is the largest interquartile range / median of the three
variants. `slower` means framejit's median exceeds eager's by more than the noise and by
more than 5%, and its best trial does too.

Run: `PYTHONPATH=. python -m benchmarks.inductor.op_sweep_timing [--only softmax]`.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

from benchmarks.timing import (calls_per_trial, fresh_caches, interleaved_samples,
                               load_average)

CACHE_ROOT = fresh_caches()

import torch  # noqa: E402  (after the cache directories are set)
import torch.nn.functional as F  # noqa: E402

import dynamo  # noqa: E402

F32, BF16, F16, I64 = torch.float32, torch.bfloat16, torch.float16, torch.int64


def _unary():
    return {
        "neg": lambda x: -x, "abs": torch.abs, "sqrt": lambda x: torch.sqrt(x.abs()),
        "rsqrt": lambda x: torch.rsqrt(x.abs() + 1), "sin": torch.sin, "cos": torch.cos,
        "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 1), "tanh": torch.tanh,
        "sigmoid": torch.sigmoid, "gelu": F.gelu, "gelu_tanh":
        lambda x: F.gelu(x, approximate="tanh"), "erf": torch.erf, "silu": F.silu,
        "relu": torch.relu, "pow_2": lambda x: x ** 2, "pow_3_5": lambda x: x.abs() ** 3.5,
        "pow_tensor": lambda x: torch.pow(x.abs(), x), "reciprocal": torch.reciprocal,
        "floor": torch.floor, "clamp": lambda x: x.clamp(-0.5, 0.5), "add_one": lambda x: x + 1,
        "masked_fill": lambda x: x.masked_fill(x > 0, 0.0), "nan_to_num": torch.nan_to_num,
    }


def _binary():
    return {
        "add": torch.add, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
        "atan2": torch.atan2, "gt": torch.gt, "eq": torch.eq,
        "where": lambda a, b: torch.where(a > b, a, b), "lerp": lambda a, b: a.lerp(b, 0.3),
        "add_row": lambda a, b: a + b[0], "add_column": lambda a, b: a + b[:, :1],
    }


def _reductions():
    ops = {}
    for dim in (1, 0):
        ops.update({f"sum{dim}": lambda x, d=dim: x.sum(d),
                    f"mean{dim}": lambda x, d=dim: x.mean(d),
                    f"amax{dim}": lambda x, d=dim: x.amax(d),
                    f"argmax{dim}": lambda x, d=dim: x.argmax(d),
                    f"var{dim}": lambda x, d=dim: x.var(d),
                    f"prod{dim}": lambda x, d=dim: x.clamp(0.9, 1.1).prod(d),
                    f"softmax{dim}": lambda x, d=dim: x.softmax(d),
                    f"log_softmax{dim}": lambda x, d=dim: x.log_softmax(d),
                    f"cumsum{dim}": lambda x, d=dim: x.cumsum(d),
                    f"logsumexp{dim}": lambda x, d=dim: torch.logsumexp(x, d)})
    ops.update({"sum_all": lambda x: x.sum(), "max_dim1": lambda x: x.max(1).values,
                "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:])})
    return ops


def _movement():
    return {
        "transpose_contiguous": lambda x: x.t().contiguous(), "cat0": lambda x: torch.cat([x, x]),
        "cat1": lambda x: torch.cat([x, x], 1), "stack": lambda x: torch.stack([x, x]),
        "flip": lambda x: x.flip(0), "pad": lambda x: F.pad(x, (1, 1, 1, 1)),
        "tril": torch.tril, "repeat": lambda x: x.repeat(2, 1),
        "to_bfloat16": lambda x: x.to(BF16), "to_int64": lambda x: x.to(I64),
    }


def _indexing():
    return {
        "index_select": lambda x, i: x.index_select(0, i),
        "gather": lambda x, i: torch.gather(x, 1, i[:, None].expand(-1, 8)),
        "embedding": lambda x, i: F.embedding(i, x), "index_rows": lambda x, i: x[i],
    }


def _other_dtypes():
    """(name, function, input maker) of the cases whose inputs are not float32."""
    return [
        ("bf16_to_float32", lambda x: x.float(), lambda n: _randn(n, BF16)),
        ("bf16_add_gelu", lambda x: F.gelu(x + 1), lambda n: _randn(n, BF16)),
        ("bf16_softmax1", lambda x: x.softmax(1), lambda n: _randn(n, BF16)),
        ("fp16_mul_add", lambda x: x * 2 + 1, lambda n: _randn(n, F16)),
        ("fp16_maximum", torch.maximum, lambda n: _randn(n, F16, 2)),
        ("fp16_amax1", lambda x: x.amax(1), lambda n: _randn(n, F16)),
        ("fp16_softmax1", lambda x: x.softmax(1), lambda n: _randn(n, F16)),
        ("fp16_sum1", lambda x: x.sum(1), lambda n: _randn(n, F16)),
        ("fp16_to_float32", lambda x: x.float(), lambda n: _randn(n, F16)),
        ("float32_to_fp16", lambda x: x.half(), lambda n: _randn(n)),
        ("int64_to_float32", lambda x: x.float(), lambda n: (_integers(n),)),
        ("int64_sum1", lambda x: x.sum(1), lambda n: (_integers(n),)),
        ("int64_mul_add", lambda x: x * 3 + 7, lambda n: (_integers(n),)),
    ]


def _randn(n, dtype=F32, count=1):
    generator = torch.Generator().manual_seed(n)
    return tuple(torch.randn(n, n, generator=generator).to(dtype) for _ in range(count))


def _integers(n):
    return torch.randint(-100, 100, (n, n), generator=torch.Generator().manual_seed(n))


def _index_inputs(n):
    (table,) = _randn(n)
    return table, torch.randint(0, n, (n,), generator=torch.Generator().manual_seed(1))


def cases():
    """(name, function, input maker: size -> inputs) of every case."""
    result = [(name, fn, _randn) for name, fn in _unary().items()]
    result += [(name, fn, lambda n: _randn(n, count=2)) for name, fn in _binary().items()]
    result += [(name, fn, _randn) for name, fn in {**_reductions(), **_movement()}.items()]
    result += [(name, fn, _index_inputs) for name, fn in _indexing().items()]
    return result + _other_dtypes()


def _samples_summary(values: list) -> tuple:
    median = statistics.median(values)
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [median] * 3
    return median, (quartiles[2] - quartiles[0]) / median if median else 0.0, min(values)


def _check(name, expected, actual):
    for want, got in zip(expected if isinstance(expected, tuple) else (expected,),
                         actual if isinstance(actual, tuple) else (actual,)):
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        torch.testing.assert_close(got, want, atol=1e-2, rtol=1e-2, equal_nan=True)


def run_case(name, function, inputs, trials: int, reference: bool, clock) -> dict:
    """Compile `function` for `inputs` with framejit (and torch.compile), time all three."""
    ours = dynamo.jit(function, backend="inductor")
    variants = {"eager": lambda: function(*inputs), "framejit": lambda: ours(*inputs)}
    compile_seconds = {}
    started = time.perf_counter()
    _check(name, function(*inputs), ours(*inputs))
    compile_seconds["framejit"] = time.perf_counter() - started
    if reference:
        torch._dynamo.reset()  # sizes specialise: no guard entries left from another size
        theirs = torch.compile(function, dynamic=False)
        started = time.perf_counter()
        theirs(*inputs)
        compile_seconds["torch.compile"] = time.perf_counter() - started
        variants["torch.compile"] = lambda: theirs(*inputs)
    for variant in variants.values():
        variant(), variant()
    counts = {key: calls_per_trial(variant, budget=0.01) for key, variant in variants.items()}
    samples = interleaved_samples(variants, trials, counts, clock=clock)
    summary = {key: _samples_summary(values) for key, values in samples.items()}
    row = {"case": name, "shape": list(inputs[0].shape), "dtype": str(inputs[0].dtype)[6:],
           "noise": max(spread for _median, spread, _best in summary.values()),
           "compile_s": compile_seconds, "load": load_average()}
    for key, (median, _spread, best) in summary.items():
        row[f"{key}_us"], row[f"{key}_best_us"] = median * 1e6, best * 1e6
    row["slower"] = _slower(row)
    return row


def _slower(row) -> bool:
    margin = 1 + max(row["noise"], 0.05)
    return (row["framejit_us"] > row["eager_us"] * margin
            and row["framejit_best_us"] > row["eager_best_us"] * margin)


def table(rows: list) -> str:
    lines = ["| case | size | eager us | framejit us | torch.compile us | framejit / eager "
             "(median / best) | noise | slower |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        reference = f"{row['torch.compile_us']:.1f}" if "torch.compile_us" in row else "-"
        lines.append(
            f"| {row['case']} | {'x'.join(map(str, row['shape']))} {row['dtype']} | "
            f"{row['eager_us']:.1f} | {row['framejit_us']:.1f} | {reference} | "
            f"{row['framejit_us'] / row['eager_us']:.2f} / "
            f"{row['framejit_best_us'] / row['eager_best_us']:.2f} | {row['noise']:.0%} | "
            f"{'**yes**' if row['slower'] else ''} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="cases whose name contains this (comma: any)")
    parser.add_argument("--sizes", default="64,1024")
    parser.add_argument("--trials", type=int, default=11)
    parser.add_argument("--no-reference", action="store_true", help="skip torch.compile")
    parser.add_argument("--clock", choices=("thread", "wall"), default="thread")
    parser.add_argument("--label", default="op-sweep-timing")
    options = parser.parse_args(argv)
    torch.set_num_threads(1)
    clock = time.thread_time if options.clock == "thread" else time.perf_counter
    wanted = [part for part in options.only.split(",") if part]
    rows = []
    with torch.no_grad():
        for size in (int(part) for part in options.sizes.split(",")):
            for name, function, make in cases():
                if wanted and not any(part in name for part in wanted):
                    continue
                row = run_case(name, function, make(size), options.trials,
                               not options.no_reference, clock)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(f"threads=1 clock={options.clock} trials={options.trials} "
          f"cpu={platform.processor() or platform.machine()} torch={torch.__version__} "
          f"load={load_average()} date={time.strftime('%Y-%m-%d %H:%M')}")
    print(table(rows))
    directory = os.path.join(os.path.dirname(__file__), "results")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{options.label}.jsonl"), "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
