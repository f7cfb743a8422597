"""One Triton kernel for a matrix product whose result rows are not 16-byte aligned.

Input: `first` (M x K) and `second` (K x N) on a GPU, of one floating dtype, an optional bias
(N or M x N, broadcast like `addmm`'s), and the contiguous M x N result to write. Output: the
result written in place: each program computes a tile in float32 with `tl.dot`, adds the bias
in float32 and rounds once, as cuBLAS's bias epilogue does, then stores the tile into the
misaligned rows with a mask (stores that cannot be vectorised cost little next to the product).

Why: cuBLAS runs such a product with unaligned kernels (GPT-2's logits: 1.68 ms on an H100
against 0.23 ms aligned), and every aligned way around it costs either copies of the result or
eight products (`aligned_matmul.py`). The configuration is chosen on first use per shape, among
a few tile shapes, by timing each on the call's own tensors.
"""
from __future__ import annotations

import logging
from typing import Optional

import torch

from inductor.runtime.triton_autotune import time_launch

log = logging.getLogger("framejit.inductor")

# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): the five best of 16 swept on
# the H100 (Triton 3.6) for GPT-2's logits (306-341 us) and BERT's MLM head (256-285 us).
# 128 x 256 tiles with 4 warps, or 256 x 256 ones, spill registers: 4-8 times slower.
CONFIGS = ((128, 256, 64, 32, 8, 3), (128, 256, 64, 16, 8, 3), (128, 256, 64, 8, 8, 4),
           (128, 256, 32, 8, 8, 5), (256, 128, 64, 8, 8, 4))

_KERNELS: dict = {}
_CHOSEN: dict = {}
_DIRECT: dict = {}


def _kernel(interpret: bool):
    """The kernel, for the GPU or (`interpret`) for Triton's interpreter on CPU tensors."""
    if interpret not in _KERNELS:
        if interpret:
            from inductor.runtime.triton_interpret import interpreting
            with interpreting():
                _KERNELS[True] = _define()
        else:
            _KERNELS[False] = _define()
    return _KERNELS[interpret]


def _define():
    import triton
    import triton.language as tl

    @triton.jit
    def product(first, second, bias, result, M, N, K: tl.constexpr, first_rows, first_columns,
                second_rows, second_columns, bias_rows, bias_columns, result_rows,
                HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        # Programs walk the tiles in groups of GROUP_M row blocks, so that the tiles running
        # together share columns of `second` in the L2 cache.
        program = tl.program_id(0)
        row_blocks = (M + BLOCK_M - 1) // BLOCK_M
        column_blocks = (N + BLOCK_N - 1) // BLOCK_N
        per_group = GROUP_M * column_blocks
        group_start = (program // per_group) * GROUP_M
        group_size = tl.minimum(row_blocks - group_start, GROUP_M)
        row_block = group_start + (program % per_group) % group_size
        column_block = (program % per_group) // group_size
        rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
        columns = column_block * BLOCK_N + tl.arange(0, BLOCK_N)
        inner = tl.arange(0, BLOCK_K)
        # (No `tl.cdiv` or `tl.zeros`: library `@jit` functions, which Triton's interpreter
        # cannot call from a kernel defined for it.) Loads wrap out-of-range rows and columns
        # around (their results are never stored), which keeps the loop's loads unmasked along
        # M and N.
        load_rows = tl.max_contiguous(tl.multiple_of(rows % M, BLOCK_M), BLOCK_M)
        load_columns = tl.max_contiguous(tl.multiple_of(columns % N, BLOCK_N), BLOCK_N)
        left = first + load_rows.to(tl.int64)[:, None] * first_rows + \
            inner[None, :] * first_columns
        right = second + inner[:, None] * second_rows + \
            load_columns.to(tl.int64)[None, :] * second_columns
        total = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
        # K is a compile-time constant: Triton 3.6's interpreter cannot loop to a runtime bound
        for step in range(0, (K + BLOCK_K - 1) // BLOCK_K):
            remaining = K - step * BLOCK_K
            a = tl.load(left, mask=inner[None, :] < remaining, other=0.0)
            b = tl.load(right, mask=inner[:, None] < remaining, other=0.0)
            total = tl.dot(a, b, total)
            left += BLOCK_K * first_columns
            right += BLOCK_K * second_rows
        inside = (rows[:, None] < M) & (columns[None, :] < N)
        if HAS_BIAS:
            total += tl.load(bias + rows.to(tl.int64)[:, None] * bias_rows +
                             columns[None, :] * bias_columns, mask=inside).to(tl.float32)
        tl.store(result + rows.to(tl.int64)[:, None] * result_rows + columns[None, :],
                 total.to(result.dtype.element_ty), mask=inside)
    return product


def _launch(config: tuple, first, second, bias, result) -> None:
    """One launch: through the kernel's compiled launcher where this configuration already
    ran with the same integer arguments and pointer alignments (Triton's Python launch path
    cost about 60 us of host time per call on the H100 machine), else through `@triton.jit`."""
    from inductor.runtime.triton_launch import _current_stream, compiled_launcher
    block_m, block_n, block_k, group_m, warps, stages = config
    rows, columns = result.shape
    has_bias = bias is not None
    if not has_bias:
        bias, bias_strides = result, (0, 0)
    elif bias.dim() == 1:       # broadcast like addmm's: row stride 0
        bias_strides = (0, bias.stride(0))
    else:
        bias_strides = tuple(0 if extent == 1 else stride
                             for extent, stride in zip(bias.shape, bias.stride()))
    tensors = (first, second, bias, result)
    integers = (rows, columns, first.shape[1], *first.stride(), *second.stride(),
                *bias_strides, result.stride(0))
    blocks = (has_bias, block_m, block_n, block_k, group_m)
    grid = -(-rows // block_m) * -(-columns // block_n)
    interpret = not result.is_cuda
    key = (config, integers, has_bias, result.dtype, result.device.index,
           tuple(tensor.data_ptr() % 16 == 0 for tensor in tensors))
    direct = None if interpret else _DIRECT.get(key)
    if direct is not None:
        run, function, metadata = direct
        run(grid, 1, 1, _current_stream(result.device), function, metadata, None, None, None,
            *tensors, *integers, *blocks)
        return
    kernel = _kernel(interpret)[(grid,)](
        *tensors, *integers, HAS_BIAS=has_bias, BLOCK_M=block_m, BLOCK_N=block_n,
        BLOCK_K=block_k, GROUP_M=group_m, num_warps=warps, num_stages=stages)
    if not interpret:
        launch = compiled_launcher(kernel, (grid,))
        if launch is not None:
            _DIRECT[key] = launch


def _fastest(first, second, bias, result) -> tuple:
    """The configuration timing best on these tensors (each compiled and run once first), or
    `()` when none compiles and runs (a Triton or GPU this kernel does not suit)."""
    timings = []
    for config in CONFIGS:
        try:    # compiles it (time_launch runs it again before timing: the GPU warms up)
            _launch(config, first, second, bias, result)
        except Exception:  # noqa: BLE001  (a tile too large for this GPU's shared memory)
            continue
        timings.append((time_launch(lambda: _launch(config, first, second, bias, result)),
                        config))
    if not timings:
        log.warning("framejit: no Triton configuration of the misaligned product %s runs on "
                    "this GPU; cuBLAS products are used instead", tuple(result.shape))
        return ()
    return min(timings)[1]


def product_into(result: torch.Tensor, first: torch.Tensor, second: torch.Tensor,
                 bias: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
    """`result` (M x N, row-major) = `bias + first @ second` (see the module docstring), or
    None where no configuration runs (the caller then takes the library ways)."""
    if not result.is_cuda:      # Triton's interpreter (tests on CPUs): the first tile shape
        config = CONFIGS[0]
    else:
        key = (tuple(result.shape), first.shape[1], result.dtype, bias is not None,
               result.device.index)
        config = _CHOSEN.get(key)
        if config is None:
            config = _CHOSEN[key] = _fastest(first, second, bias, result)
        if not config:
            return None
    _launch(config, first, second, bias, result)
    return result
