"""Matrix products whose result rows are not 16-byte aligned, run as aligned ones.

Input: the operands of `mm` or `addmm` (2-D, on a GPU) whose result has a row length that is
not a multiple of 16 bytes, e.g. GPT-2's logits, 2048 x 50257 in bfloat16. Output: the product,
contiguous like eager's. cuBLAS picks an unaligned kernel for such a result: 1.68 ms on an
H100 for GPT-2's logits, against 0.23 ms for the same product with rows padded to 16 bytes
(torch.compile pads too). So the right operand is copied with zero columns up to aligned
rows, the product computed in row blocks (each at most SCRATCH_BYTES) and each block copied
into the contiguous result.
"""
from __future__ import annotations

from typing import Optional

import torch

SCRATCH_BYTES = 64 << 20      # the padded block's size at most (one block when smaller)
ALIGNMENT_BYTES = 16


def padded_row(columns: int, element_size: int) -> int:
    """`columns` rounded up to a whole number of 16-byte units."""
    unit = max(1, ALIGNMENT_BYTES // element_size)
    return -(-columns // unit) * unit


def _row_block(rows: int, padded: int, element_size: int) -> int:
    return max(1, min(rows, SCRATCH_BYTES // max(1, padded * element_size)))


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
    padded = padded_row(columns, result.element_size())
    # The right operand padded with zero columns: products come out with aligned rows (a
    # result written through `out=` with padded strides is computed contiguously by ATen and
    # copied, which is the slow kernel again).
    wide = torch.empty((second.shape[0], padded), dtype=second.dtype, device=second.device)
    wide[:, :columns].copy_(second)
    wide[:, columns:].zero_()
    if bias is not None and bias.dim() == 2 and bias.shape[0] != 1:
        wide_bias = torch.zeros((rows, padded), dtype=bias.dtype, device=bias.device)
    else:
        wide_bias = None if bias is None else torch.zeros(padded, dtype=bias.dtype,
                                                           device=bias.device)
    if wide_bias is not None:
        wide_bias[..., :columns].copy_(bias.reshape(-1) if bias.dim() == 2 and
                                       bias.shape[0] == 1 else bias)
    block = _row_block(rows, padded, result.element_size())
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        if wide_bias is None:
            part = torch.mm(first[start:stop], wide)
        else:
            rows_bias = wide_bias[start:stop] if wide_bias.dim() == 2 else wide_bias
            part = torch.addmm(rows_bias, first[start:stop], wide)
        result[start:stop].copy_(part[:, :columns])
    return result


def wants_alignment(rows: int, columns: int, element_size: int, device: torch.device) -> bool:
    """Whether a product of this result shape should run as an aligned product: on GPUs,
    for results of a million elements or more whose rows are not 16-byte aligned."""
    return device.type == "cuda" and (columns * element_size) % ALIGNMENT_BYTES != 0 and \
        rows * columns >= (1 << 20)
