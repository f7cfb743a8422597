"""Lowerings of scans along one dimension: `cumsum`, `cumprod`, `logcumsumexp`.

Input: the ATen ops with a lowered operand, a dim and (`cumsum`, `cumprod`) an optional
`dtype`. Output: a realized `ScanBuffer` whose body (the operand converted to the result's
dtype) stays inlined, so pointwise producers run inside the scan's kernel. Accumulation
follows eager's kernels: on CPU in float64 for float32, float32 for half types, int64 for
integers (booleans and integers without `dtype` give int64); on CUDA float32 for float32.
A scan over one element or none, and a 0-d operand, is a pointwise body instead.
"""
from __future__ import annotations

import sympy
import torch

from inductor.config import config
from inductor.ir.layout import Layout
from inductor.ir.nodes import Pointwise, ScanBuffer, TensorBox, current_graph
from inductor.ir.ops import ops
from inductor.ir.symbols import product
from inductor.lower.registry import register_lowering

aten = torch.ops.aten

HALF_TYPES = (torch.float16, torch.bfloat16)
# the scans Triton's backend prints (codegen/triton/scan.py); others run eager's kernel there
TRITON_SCANS = ("sum", "prod")
# the longest line a Triton scan holds in one block (longer lines run eager's kernel)
TRITON_LINE = 16384


def accumulate_dtype(dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype eager's scan kernels accumulate `dtype` values in on `device`."""
    if dtype in HALF_TYPES:
        return torch.float32
    if dtype == torch.float32:
        return torch.float64 if device.type == "cpu" else torch.float32
    if dtype.is_floating_point:
        return dtype
    return torch.int64


def _scan(x: TensorBox, dim: int, scan_type: str, dtype) -> TensorBox:
    source = x.get_dtype()
    if source.is_complex or (dtype is not None and dtype.is_complex):
        raise NotImplementedError("complex scans run through the eager kernel")
    if dtype is None:
        dtype = source if source.is_floating_point else torch.int64
    if scan_type == "logsumexp" and not dtype.is_floating_point:
        raise NotImplementedError("logcumsumexp of integers: eager's kernel raises")
    size = x.get_size()
    device = x.get_device()
    rank = len(size)
    if not -max(rank, 1) <= dim < max(rank, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(rank, 1)}, {max(rank, 1) - 1}], but got {dim})")
    dim = dim + rank if dim < 0 else dim
    acc = accumulate_dtype(dtype, device)
    loader = x.make_loader()

    def body(index):
        value = loader(index)
        return value if source == dtype else ops.to_dtype(value, dtype, source)

    length = size[dim] if rank else sympy.Integer(1)
    count = sympy.sympify(length)
    if rank == 0 or (count.is_Integer and int(count) <= 1) or \
            (product(size).is_Integer and int(product(size)) == 0):
        # one element per line: the element itself (sum, prod and logsumexp of one value)
        return TensorBox.create(Pointwise(device, dtype, body, size))
    if config.uses_triton(device) and (
            scan_type not in TRITON_SCANS or not count.is_Integer or
            int(count) > TRITON_LINE or acc == torch.float64 and device.type != "cpu"):
        raise NotImplementedError(f"Triton scans: {scan_type} over {length} elements run "
                                  f"through the eager kernel")
    layout = Layout(device, dtype, size)
    buffer = ScanBuffer(None, layout, Pointwise(device, dtype, body, size), dim, scan_type,
                        acc)
    current_graph().register_buffer(buffer)
    return TensorBox.create(buffer)


@register_lowering(aten.cumsum.default)
def cumsum(x, dim, *, dtype=None):
    return _scan(x, dim, "sum", dtype)


@register_lowering(aten.cumprod.default)
def cumprod(x, dim, *, dtype=None):
    return _scan(x, dim, "prod", dtype)


@register_lowering(aten.logcumsumexp.default)
def logcumsumexp(x, dim):
    return _scan(x, dim, "logsumexp", None)
