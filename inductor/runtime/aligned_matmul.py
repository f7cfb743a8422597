"""Matrix products whose result rows are not 16-byte aligned, run as aligned ones.

Input: the operands of `mm` or `addmm` (2-D, on a GPU) whose result has a row length that is
not a multiple of 16 bytes, e.g. GPT-2's logits, 2048 x 50257 in bfloat16. Output: the product,
contiguous like eager's. cuBLAS picks an unaligned kernel for such a result: 1.68 ms on an
H100 for GPT-2's logits, against 0.23 ms for the same product with rows padded to 16 bytes.
(torch.compile 2.11 pads the rows and returns the padded view, with strides unlike eager's.)

One Triton kernel (`_in_triton`, `triton_product.py`) for bf16 and fp16: the fastest way, and
one launch instead of several library calls and copies (host time counts: these models are
host-bound). The two ways below serve float32 (whose cuBLAS products follow torch's TF32
settings) and `config.triton_products = False`.

Row groups (`_row_groups`), where the operands allow: with `columns` odd, every 8th row of a
bfloat16 result starts on a 16-byte boundary, and so does row `k + 8i` at column `(-k *
columns) mod 8`. So the rows `k, k + 8, ...` from that column on form an aligned matrix (leading
dimension `8 * columns`), and each of the 8 groups is one product written straight into the
contiguous result through `out=`, its width a whole number of 16-byte units (cuBLAS picks its
unaligned kernels for an odd width too); the first and last 16 bytes of every row come from
two narrow products, copied in first. No scratch, no copy of the result.

Column blocks (`_blocked_product`), otherwise (a right operand whose columns cannot be offset
and stay aligned, a row-major one): the product is computed in blocks of columns whose width is
a whole number of 16-byte units (each block's scratch at most SCRATCH_BYTES, unless that would
make blocks narrower than MIN_BLOCK_COLUMNS), the last, ragged block against its columns of
the right operand padded with zeros, and each block is copied into the contiguous result by a
tiled Triton copy (ATen's strided copies took 255 us of GPT-2's call, the Triton ones 186).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from inductor.config import config

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
    """`bias + first @ second` (see the module docstring)."""
    return _product(bias, first, second)


def aligned_mm(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """`first @ second` (see the module docstring)."""
    return _product(None, first, second)


def _product(bias: Optional[torch.Tensor], first: torch.Tensor,
             second: torch.Tensor) -> torch.Tensor:
    result = _in_triton(bias, first, second)
    if result is None:
        result = _row_groups(bias, first, second)
    return _blocked_product(bias, first, second) if result is None else result


def _in_triton(bias: Optional[torch.Tensor], first: torch.Tensor,
               second: torch.Tensor) -> Optional[torch.Tensor]:
    """The product by one Triton kernel (`triton_product.py`) for half types on a GPU, or
    None (float32 keeps cuBLAS, whose TF32 use follows torch's settings)."""
    dtype = first.dtype
    if not first.is_cuda or dtype not in (torch.bfloat16, torch.float16) or \
            second.dtype != dtype or (bias is not None and bias.dtype != dtype) or \
            not config.triton_products:
        return None
    from inductor.runtime import triton_product
    result = torch.empty((first.shape[0], second.shape[1]), dtype=dtype, device=first.device)
    return triton_product.product_into(result, first, second, bias)


def _aligned_rows(matrix: torch.Tensor) -> bool:
    """Whether `matrix` is row-major with every row starting on a 16-byte boundary."""
    size = matrix.element_size()
    return matrix.stride(1) == 1 and (matrix.stride(0) * size) % ALIGNMENT_BYTES == 0 and \
        matrix.data_ptr() % ALIGNMENT_BYTES == 0


def _row_groups(bias: Optional[torch.Tensor], first: torch.Tensor,
                second: torch.Tensor) -> Optional[torch.Tensor]:
    """The product written in aligned row groups (see the module docstring), or None where
    the operands do not allow it: the right operand must be a transposed row-major matrix
    (a weight of `linear`) whose columns can start anywhere aligned, and the left one must
    have aligned rows."""
    rows, columns = first.shape[0], second.shape[1]
    dtype = torch.result_type(first, second)
    if first.dtype != dtype or second.dtype != dtype or \
            not _aligned_rows(second.t()) or not _aligned_rows(first):
        return None
    unit = max(1, ALIGNMENT_BYTES // first.element_size())
    groups = unit // math.gcd(columns, unit)
    if columns < 2 * unit or rows < groups:
        return None
    if bias is not None and bias.dim() == 2 and bias.shape[0] == 1:
        bias = bias.reshape(-1)
    result = torch.empty((rows, columns), dtype=dtype, device=first.device)
    # Each group's product covers whole 16-byte units of columns (cuBLAS's fast kernels want
    # that of the row length too); the first and last `unit` columns of every row come from
    # two narrow products first, and the groups write over what they cover.
    for edge in (slice(0, unit), slice(columns - unit, columns)):
        narrow = torch.mm(first, second[:, edge]) if bias is None else \
            torch.addmm(bias[..., edge], first, second[:, edge])
        result[:, edge].copy_(narrow)
    for group in range(groups):
        skip = (-group * columns) % unit
        width = (columns - skip) // unit * unit
        count = len(range(group, rows, groups))
        out = result.as_strided((count, width), (groups * columns, 1),
                                group * columns + skip)
        left, right = first[group::groups], second[:, skip:skip + width]
        if bias is None:
            torch.mm(left, right, out=out)
        else:
            part = bias[..., skip:skip + width] if bias.dim() < 2 else \
                bias[group::groups, skip:skip + width]
            torch.addmm(part, left, right, out=out)
    return result


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
        _copy_rows(result[:, start:stop], part[:, :width] if padded != width else part)
        del part    # one block alive at a time: the next product must not overlap it
    return result


def _copy_rows(target: torch.Tensor, source: torch.Tensor) -> None:
    """`target.copy_(source)` for 2-D row-major matrices of one dtype; on GPUs through a tiled
    Triton kernel (ATen's strided copy into misaligned rows ran at about half the bandwidth:
    265 us for GPT-2's logits)."""
    if not target.is_cuda or target.dtype != source.dtype or target.stride(1) != 1 or \
            source.stride(1) != 1:
        target.copy_(source)
        return
    from inductor.runtime.triton_launch import cdiv
    rows, columns = target.shape
    kernel = _copy_kernel()
    grid = (cdiv(rows, COPY_ROWS), cdiv(columns, COPY_COLUMNS))
    kernel[grid](source, target, rows, columns, source.stride(0), target.stride(0),
                 ROWS=COPY_ROWS, COLUMNS=COPY_COLUMNS, num_warps=4)


COPY_ROWS, COPY_COLUMNS = 16, 256


_COPY_KERNEL: list = []


def _copy_kernel():
    """The Triton copy of a row-major block (compiled on first use)."""
    if _COPY_KERNEL:
        return _COPY_KERNEL[0]
    import triton
    import triton.language as tl

    @triton.jit
    def copy_rows(source, target, rows, columns, source_stride, target_stride,
                  ROWS: tl.constexpr, COLUMNS: tl.constexpr):
        row = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]
        column = tl.program_id(1) * COLUMNS + tl.arange(0, COLUMNS)[None, :]
        mask = (row < rows) & (column < columns)
        values = tl.load(source + row * source_stride + column, mask)
        tl.store(target + row * target_stride + column, values, mask)
    _COPY_KERNEL.append(copy_rows)
    return copy_rows


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
    """`value` (1-D or 2-D) with zero columns appended up to `padded` columns, laid out like
    `value` (a transposed weight's block stays transposed: copying it into row-major columns
    read it across rows, 38 us for BERT's last block on an H100)."""
    if value.dim() == 2 and value.stride(0) == 1 and value.stride(1) != 1:
        wide = torch.zeros((padded, value.shape[0]), dtype=value.dtype, device=value.device).t()
    else:
        wide = torch.zeros((*value.shape[:-1], padded), dtype=value.dtype, device=value.device)
    wide[..., :value.shape[-1]].copy_(value)
    return wide


def wants_alignment(rows: int, columns: int, element_size: int, device: torch.device) -> bool:
    """Whether a product of this result shape should run as an aligned product: on GPUs,
    for results of a million elements or more whose rows are not 16-byte aligned."""
    return device.type == "cuda" and (columns * element_size) % ALIGNMENT_BYTES != 0 and \
        rows * columns >= (1 << 20)
