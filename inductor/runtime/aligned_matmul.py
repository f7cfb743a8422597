"""Matrix products whose result rows are not 16-byte aligned, run as aligned ones.

Input: the operands of `mm` or `addmm` (2-D, on a GPU) whose result has a row length that is
not a multiple of 16 bytes, e.g. GPT-2's logits, 2048 x 50257 in bfloat16. Output: the product,
contiguous like eager's. cuBLAS picks an unaligned kernel for such a result: 1.68 ms on an
H100 for GPT-2's logits, against 0.23 ms for the same product with rows padded to 16 bytes
(torch.compile pads too). So the product is computed in blocks of columns whose width is a
whole number of 16-byte units (each block's scratch at most SCRATCH_BYTES, unless that would
make blocks narrower than MIN_BLOCK_COLUMNS), the last, ragged block against its columns of
the right operand padded with zeros, and each block is copied into the contiguous result.
Scratch memory is one block: an earlier version padded the whole right operand and computed
row blocks, which held GPT-2's padded 77 MB weight plus a 64 MB block at its peak.
"""
from __future__ import annotations

from typing import Optional

import torch

SCRATCH_BYTES = 32 << 20      # a block's product at most (unless blocks get too narrow)
MIN_BLOCK_COLUMNS = 8192      # fewer, larger products where rows are many (host time)
ALIGNMENT_BYTES = 16


def padded_row(columns: int, element_size: int) -> int:
    """`columns` rounded up to a whole number of 16-byte units."""
    unit = max(1, ALIGNMENT_BYTES // element_size)
    return -(-columns // unit) * unit


def _block_columns(rows: int, columns: int, element_size: int) -> int:
    """Columns per block: a whole number of 16-byte units."""
    unit = max(1, ALIGNMENT_BYTES // element_size)
    wanted = max(SCRATCH_BYTES // max(1, rows * element_size), min(MIN_BLOCK_COLUMNS, columns))
    return max(unit, wanted // unit * unit)


def aligned_addmm(bias: torch.Tensor, first: torch.Tensor,
                  second: torch.Tensor) -> torch.Tensor:
    """`bias + first @ second` as an aligned product (see the module docstring)."""
    return _blocked_product(bias, first, second)


def aligned_mm(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """`first @ second` as an aligned product (see the module docstring)."""
    return _blocked_product(None, first, second)


def _blocked_product(bias: Optional[torch.Tensor], first: torch.Tensor,
                     second: torch.Tensor) -> torch.Tensor:
    rows, columns = first.shape[0], second.shape[1]
    dtype = torch.result_type(first, second)
    result = torch.empty((rows, columns), dtype=dtype, device=first.device)
    if bias is not None and bias.dim() == 2 and bias.shape[0] == 1:
        bias = bias.reshape(-1)
    block = _block_columns(rows, columns, result.element_size())
    for start in range(0, columns, block):
        stop = min(columns, start + block)
        right = _aligned_operand(second[:, start:stop])
        part_bias = None if bias is None else bias[..., start:stop]
        width = stop - start
        padded = padded_row(width, result.element_size())
        if padded != width:
            # A result written through `out=` with padded strides is computed contiguously by
            # ATen and copied, which is the slow kernel again: pad the operand instead.
            right = _with_zero_columns(right, padded)
            if part_bias is not None:
                part_bias = _with_zero_columns(part_bias, padded)
        part = torch.mm(first, right) if part_bias is None else \
            torch.addmm(part_bias, first, right)
        result[:, start:stop].copy_(part[:, :width] if padded != width else part)
        del part    # one block alive at a time: the next product must not overlap it
    return result


def _aligned_operand(matrix: torch.Tensor) -> torch.Tensor:
    """`matrix` itself when one of its strides is 1 and the other a whole number of 16-byte
    units (a column slice of a transposed weight), else a contiguous copy (one block)."""
    units = ALIGNMENT_BYTES // matrix.element_size()
    first, second = matrix.stride()
    if (second == 1 and first % units == 0) or (first == 1 and second % units == 0):
        if matrix.data_ptr() % ALIGNMENT_BYTES == 0:
            return matrix
    return matrix.contiguous()


def _with_zero_columns(value: torch.Tensor, padded: int) -> torch.Tensor:
    """`value` (1-D or 2-D) with zero columns appended up to `padded` columns."""
    wide = torch.zeros((*value.shape[:-1], padded), dtype=value.dtype, device=value.device)
    wide[..., :value.shape[-1]].copy_(value)
    return wide


def wants_alignment(rows: int, columns: int, element_size: int, device: torch.device) -> bool:
    """Whether a product of this result shape should run as an aligned product: on GPUs,
    for results of a million elements or more whose rows are not 16-byte aligned."""
    return device.type == "cuda" and (columns * element_size) % ALIGNMENT_BYTES != 0 and \
        rows * columns >= (1 << 20)
