"""How should a large depthwise convolution be lowered on the GPU? ConvNeXt-tiny (bf16, batch
16) and one stage-1 block (96 channels, 56x56) under variants of `inductor/lower/convolution.py`:
"fused" (the generated body fused into its consumers, as before MAX_FUSED_TAPS), "own" (the
body in a kernel of its own above MAX_FUSED_TAPS taps: the lowering's choice), "library" (the
convolution library above 25 taps), "nolib" (no generated convolutions at all); each also with
`config.gpu_channels_last` ("+cl"). Per variant: median wall ms per call, device ms per call
(torch.profiler), the largest difference from eager; then torch.compile and eager.

A diagnostic, not a benchmark (results: benchmarks/experiments/results/h200-depthwise-*.txt):
    python -m benchmarks.experiments.diag_depthwise
"""
from __future__ import annotations

import statistics
import time

import torch
from torchvision.models.convnext import CNBlock

import dynamo
import inductor.lower.convolution as convolution
from benchmarks.zoo.catalog import build_workload
from inductor.config import config

ORIGINAL = convolution._depthwise
TAPS = convolution.MAX_FUSED_TAPS


def _library_above_25_taps(x, weight, bias, sizes, kernel, *rest):
    return None if kernel[2] * kernel[3] > 25 else ORIGINAL(x, weight, bias, sizes, kernel, *rest)


VARIANTS = {"fused": (ORIGINAL, 10 ** 6, True), "own": (ORIGINAL, TAPS, True),
            "library": (_library_above_25_taps, TAPS, True), "nolib": (ORIGINAL, TAPS, False)}


def wall_ms(function, calls: int = 20) -> float:
    for _ in range(3):
        function()
    torch.cuda.synchronize()
    trials = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        torch.cuda.synchronize()
        trials.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(trials)


def device_ms(function) -> float:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        for _ in range(10):
            function()
        torch.cuda.synchronize()
    return sum(event.device_time_total for event in profiler.key_averages()
               if event.device_time_total > 0) / 10 / 1e3


def subjects():
    workload = build_workload("convnext_tiny", "cuda", torch.bfloat16, batch=16)
    yield "convnext_tiny", workload.model, workload.args
    block = CNBlock(96, 1e-6, 0.0).eval().cuda().to(torch.bfloat16)
    yield "block96x56", block, (torch.randn(16, 96, 56, 56, device="cuda", dtype=torch.bfloat16),)


def measure(model, args, reference, variant: tuple, channels_last: bool) -> tuple:
    depthwise, taps, without_library = variant
    convolution._depthwise, convolution.MAX_FUSED_TAPS = depthwise, taps
    config.gpu_channels_last, config.convolutions_without_library = channels_last, without_library
    try:
        dynamo.reset()
        compiled = dynamo.jit(model)
        error = (compiled(*args).float() - reference).abs().max().item()
        return (round(wall_ms(lambda: compiled(*args)), 3),
                round(device_ms(lambda: compiled(*args)), 3), error)
    finally:
        convolution._depthwise, convolution.MAX_FUSED_TAPS = ORIGINAL, TAPS
        config.gpu_channels_last, config.convolutions_without_library = False, True


def main() -> None:
    with torch.no_grad():
        for name, model, args in subjects():
            reference = model(*args).float()
            for label, variant in VARIANTS.items():
                for channels_last in (False, True):
                    row = measure(model, args, reference, variant, channels_last)
                    print(name, label + ("+cl" if channels_last else ""),
                          "wall ms, device ms, max error", row, flush=True)
            dynamo.reset()
            theirs = torch.compile(model)
            theirs(*args)
            for _ in range(2):
                print(name, "torch.compile", round(wall_ms(lambda: theirs(*args)), 3),
                      round(device_ms(lambda: theirs(*args)), 3), "eager",
                      round(wall_ms(lambda: model(*args)), 3),
                      round(device_ms(lambda: model(*args)), 3), flush=True)


if __name__ == "__main__":
    main()
