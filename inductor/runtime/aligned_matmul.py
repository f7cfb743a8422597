"""Matrix products whose result rows are not 16-byte aligned, run as aligned ones.

Input: the operands of `mm` or `addmm` (2-D, on a GPU) whose result has a row length that is
not a multiple of 16 bytes, e.g. GPT-2's logits, 2048 x 50257 in bfloat16. Output: the product,
contiguous like eager's. cuBLAS picks an unaligned kernel for such a result: 1.68 ms on an
H100 for GPT-2's logits, against 0.23 ms for the same product into rows padded to 16 bytes.
So the product is computed in row blocks into a padded scratch block and copied into the
contiguous result; the block is sized so the scratch stays small next to the result.
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
    """`bias + first @ second` through padded row blocks (see the module docstring)."""
    return _blocked_product(bias, first, second)


def aligned_mm(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """`first @ second` through padded row blocks (see the module docstring)."""
    return _blocked_product(None, first, second)


def _blocked_product(bias: Optional[torch.Tensor], first: torch.Tensor,
                     second: torch.Tensor) -> torch.Tensor:
    rows, columns = first.shape[0], second.shape[1]
    dtype = torch.result_type(first, second)
    result = torch.empty((rows, columns), dtype=dtype, device=first.device)
    padded = padded_row(columns, result.element_size())
    block = _row_block(rows, padded, result.element_size())
    scratch = torch.empty_strided((block, columns), (padded, 1), dtype=dtype,
                                  device=first.device)
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        part = scratch[:stop - start]
        if bias is None:
            torch.mm(first[start:stop], second, out=part)
        else:
            rows_bias = bias if bias.dim() < 2 or bias.shape[0] == 1 else bias[start:stop]
            torch.addmm(rows_bias, first[start:stop], second, out=part)
        result[start:stop].copy_(part)
    return result


def wants_alignment(rows: int, columns: int, element_size: int, device: torch.device) -> bool:
    """Whether a product of this result shape should run through padded row blocks: on GPUs,
    for results of a million elements or more whose rows are not 16-byte aligned."""
    return device.type == "cuda" and (columns * element_size) % ALIGNMENT_BYTES != 0 and \
        rows * columns >= (1 << 20)
