"""Misaligned products on the GPU (`inductor/runtime/aligned_matmul.py`): device and host time
of each way to compute GPT-2's logits (2048 x 768 @ 768 x 50257) and BERT-base's MLM head
(the same with 30522 columns and a bias) in bf16, against eager's unaligned kernel, with the
largest difference from eager's values.

Ways: `eager` (torch.mm / torch.addmm), `blocks` (column blocks copied into the result),
`groups` (aligned row groups written in place, ATen adding the bias per group),
`blocks-aten-copy` (column blocks copied by ATen's strided copy, the way before), `triton`
(one Triton kernel writing the misaligned rows, `inductor/runtime/triton_product.py`).

A diagnostic, not a benchmark:
    python -m benchmarks.triton.diag_aligned
"""
from __future__ import annotations

import json
import time

import torch

from inductor.runtime import aligned_matmul, triton_product


def blocks_with_aten_copies(bias, first, second):
    """Column blocks copied by ATen's strided copy (the way before the Triton copy)."""
    saved = aligned_matmul._copy_rows
    aligned_matmul._copy_rows = lambda target, source: target.copy_(source)
    try:
        return aligned_matmul._blocked_product(bias, first, second)
    finally:
        aligned_matmul._copy_rows = saved


def timed(function, repeats: int = 20) -> dict:
    for _ in range(3):
        function()
    torch.cuda.synchronize()
    host, started = 0.0, time.perf_counter()
    for _ in range(repeats):
        begun = time.perf_counter()
        function()
        host += time.perf_counter() - begun
    torch.cuda.synchronize()
    wall = (time.perf_counter() - started) / repeats
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profiler:
        for _ in range(5):
            function()
        torch.cuda.synchronize()
    kernels = [(event.key[:60], round(event.device_time_total / 5, 1), event.count // 5)
               for event in profiler.key_averages() if event.device_time_total > 0]
    device = sum(kernel[1] for kernel in kernels)
    return {"wall_us": round(wall * 1e6, 1), "host_us": round(host / repeats * 1e6, 1),
            "device_us": round(device, 1), "kernels": kernels}


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(2048, 768, device="cuda", dtype=torch.bfloat16)
    for name, columns, with_bias in (("gpt2 logits", 50257, False), ("bert mlm", 30522, True)):
        weight = torch.randn(columns, 768, device="cuda", dtype=torch.bfloat16) * 0.03
        bias = torch.randn(columns, device="cuda", dtype=torch.bfloat16) if with_bias else None
        second = weight.t()
        expected = torch.mm(x.float(), second.float())
        if bias is not None:
            expected += bias.float()
        ways = {
            "eager": (lambda: torch.mm(x, second)) if bias is None else
                     (lambda: torch.addmm(bias, x, second)),
            "blocks": lambda: aligned_matmul._blocked_product(bias, x, second),
            "groups": lambda: aligned_matmul._row_groups(bias, x, second),
            "blocks-aten-copy": lambda: blocks_with_aten_copies(bias, x, second),
            "triton": lambda: triton_product.product_into(
                torch.empty(2048, columns, device="cuda", dtype=torch.bfloat16), x, second, bias),
        }
        for way, function in ways.items():
            result = function()
            row = {"case": name, "way": way, "contiguous": result.is_contiguous(),
                   "max_error": float((result.float() - expected).abs().max()),
                   **timed(function)}
            if way == "triton":
                row["config"] = {str(key): value for key, value in triton_product._CHOSEN.items()}
            print(json.dumps(row, default=str), flush=True)
            del result
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
