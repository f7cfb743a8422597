"""Streaming kernels on a GPU: bandwidth of framejit's Triton kernels against a measured copy
and against torch.compile.

Cases (bf16): `x*2+1`; `gelu(a*w+b)` with w, b broadcast along rows; sum over the last and
over the first dimension; softmax and layer norm over rows of 1024, 4096 and 32768. Each
moves the bytes it must (inputs read once, outputs written once); GB/s counts those bytes
over the median time of CUDA-event-timed batches, after warm-up (autotuning included), with
three input sets rotated so the 50 MB L2 does not serve repeats. The copy reference is
`out.copy_(x)` of 512 MiB (bytes read + written).

    python -m benchmarks.triton.streaming [--elements 67108864] [--cases x2p1,softmax4096]
        [--mode default] [--output results.jsonl] [--no-torch-compile]
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from benchmarks.timing import cuda_event_seconds, seconds_per_call, timed

CASES = {}


def case(name):
    def register(function):
        CASES[name] = function
        return function
    return register


def _bytes(*tensors) -> int:
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)


@case("x2p1")
def pointwise(elements):
    def function(x):
        return x * 2 + 1
    x = torch.randn(elements, device="cuda", dtype=torch.bfloat16)
    return function, (x,), 2 * _bytes(x)


@case("gelu_affine")
def gelu_affine(elements):
    def function(a, w, b):
        return F.gelu(a * w + b)
    columns = 4096
    a = torch.randn(elements // columns, columns, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(columns, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(columns, device="cuda", dtype=torch.bfloat16)
    return function, (a, w, b), 2 * _bytes(a) + _bytes(w, b)


def _sum(dim):
    def build(elements):
        def function(x):
            return x.sum(dim)
        x = torch.randn(elements // 4096, 4096, device="cuda", dtype=torch.bfloat16)
        out = x.shape[1 - dim] * x.element_size()
        return function, (x,), _bytes(x) + out
    return build


CASES["sum_last"] = _sum(1)
CASES["sum_first"] = _sum(0)


def _softmax(row):
    def build(elements):
        def function(x):
            return torch.softmax(x, -1)
        x = torch.randn(elements // row, row, device="cuda", dtype=torch.bfloat16)
        return function, (x,), 2 * _bytes(x)
    return build


def _layer_norm(row):
    def build(elements):
        def function(x, weight, bias):
            return F.layer_norm(x, (row,), weight, bias)
        x = torch.randn(elements // row, row, device="cuda", dtype=torch.bfloat16)
        weight = torch.randn(row, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(row, device="cuda", dtype=torch.bfloat16)
        return function, (x, weight, bias), 2 * _bytes(x) + _bytes(weight, bias)
    return build


for _row in (1024, 4096, 32768):
    CASES[f"softmax{_row}"] = _softmax(_row)
    CASES[f"layernorm{_row}"] = _layer_norm(_row)


def copy_bandwidth() -> float:
    x = torch.empty(256 * 2 ** 20, device="cuda", dtype=torch.float16).normal_()
    outs = [torch.empty_like(x) for _ in range(2)]
    seconds = cuda_event_seconds(lambda out: out.copy_(x), [(out,) for out in outs])
    return 2 * _bytes(x) / seconds / 1e9


def compile_ours(function, inputs, mode):
    import inductor
    graph = torch.fx.symbolic_trace(function)

    def compile_and_call():
        compiled = inductor.compile_fx(graph, list(inputs), mode=mode)
        compiled(*inputs)
        return compiled
    compiled, seconds = timed(compile_and_call, torch.cuda.synchronize)
    return compiled, seconds, compiled.report


def choices(compiled) -> str:
    """The variant and block sizes autotuning chose for each kernel of a compiled graph."""
    from inductor.runtime.triton_launch import Launcher
    found, pending, seen = [], [compiled], set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        for attribute in ("run", "compiled"):
            if hasattr(value, attribute):
                pending.append(getattr(value, attribute))
        for item in (getattr(value, "__globals__", None) or {}).values():
            if isinstance(item, Launcher) and item.choice is not None:
                found.append(f"{item.spec.kind}/{item.spec.strategy or '-'} "
                             f"{item.choice.describe()}")
        for cell in getattr(value, "__closure__", None) or ():
            pending.append(cell.cell_contents)
    return " | ".join(found)


def launch_overhead(calls: int = 2000) -> dict:
    """Host microseconds per call of a one-kernel graph (`x * 2 + 1` on 1024 elements):
    eager (two ops), ours in both modes, torch.compile."""
    import inductor
    x = torch.randn(1024, device="cuda")

    def function(t):
        return t * 2 + 1
    graph = torch.fx.symbolic_trace(function)
    variants = {"eager": function,
                "ours": inductor.compile_fx(graph, [x]),
                "ours_reduce_overhead": inductor.compile_fx(graph, [x], mode="reduce-overhead"),
                "torch_compile": torch.compile(function, dynamic=False)}
    result = {}
    for name, variant in variants.items():
        for _ in range(20):
            variant(x)
        result[name] = seconds_per_call(lambda: variant(x), calls,
                                        torch.cuda.synchronize) * 1e6
    return result


def compile_torch(function, inputs):
    compiled = torch.compile(function, dynamic=False)
    return compiled, timed(lambda: compiled(*inputs), torch.cuda.synchronize)[1]


def run_case(name, elements, mode, with_torch_compile, reference):
    function, inputs, moved = CASES[name](elements)
    input_sets = [inputs] + [tuple(value.clone() for value in inputs) for _ in range(2)]
    expected = function(*inputs)
    ours, our_compile, report = compile_ours(function, inputs, mode)
    torch.testing.assert_close(ours(*inputs), expected, atol=3e-2, rtol=3e-2)
    row = {"case": name, "elements": elements, "bytes": moved, "mode": mode or "default",
           "copy_gbps": reference, "kernels": report.kernel_count,
           "ours_compile_s": round(our_compile, 2)}
    row["eager_ms"] = cuda_event_seconds(function, input_sets) * 1e3
    row["ours_ms"] = cuda_event_seconds(ours, input_sets) * 1e3
    if with_torch_compile:
        theirs, their_compile = compile_torch(function, inputs)
        row["torch_compile_ms"] = cuda_event_seconds(theirs, input_sets) * 1e3
        row["torch_compile_compile_s"] = round(their_compile, 2)
    for key in ("eager", "ours", "torch_compile"):
        if f"{key}_ms" in row:
            row[f"{key}_gbps"] = moved / (row[f"{key}_ms"] / 1e3) / 1e9
    row["ours_of_copy"] = row["ours_gbps"] / reference
    row["choices"] = choices(ours)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--elements", type=int, default=64 * 2 ** 20)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--mode", default=None)
    parser.add_argument("--output", default=None)
    parser.add_argument("--no-torch-compile", action="store_true")
    parser.add_argument("--overhead", action="store_true",
                        help="also measure the host cost per call of a one-kernel graph")
    options = parser.parse_args(argv)
    if options.overhead:
        overhead = launch_overhead()
        print("host us per call:", ", ".join(f"{key} {value:.1f}"
                                             for key, value in overhead.items()))
        if options.output:
            with open(options.output, "a") as handle:
                handle.write(json.dumps({"case": "launch_overhead_us", **overhead}) + "\n")
    reference = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy {reference:.0f} GB/s (read + write)")
    print(f"{'case':<14}{'eager':>8}{'tc':>8}{'ours':>8}  GB/s   ours/copy  ours/tc  compile s"
          " (ours/tc)")
    for name in options.cases.split(","):
        try:
            row = run_case(name, options.elements, options.mode, not options.no_torch_compile,
                           reference)
        except Exception as error:  # noqa: BLE001  (report and go on with the next case)
            print(f"{name:<14} failed: {type(error).__name__}: {str(error)[:300]}")
            continue
        tc = row.get("torch_compile_gbps", float("nan"))
        print(f"{name:<14}{row['eager_gbps']:8.0f}{tc:8.0f}{row['ours_gbps']:8.0f}"
              f"  {row['ours_of_copy']:9.2f}  {row['ours_gbps'] / tc:7.2f}  "
              f"{row['ours_compile_s']:.1f}/{row.get('torch_compile_compile_s', 0):.1f}  "
              f"{row['choices']}", flush=True)
        if options.output:
            with open(options.output, "a") as handle:
                handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
