"""Layouts of loop-IR buffers: how an index maps to an offset in storage.

Input: sizes, strides and offsets (sympy expressions), a dtype and a device. Output: `Layout`
objects that turn a multi-dimensional index into a linear storage offset. A flexible layout
(strides not yet promised to anyone) may still change; `freeze` fixes it. Layouts are frozen
late: when a buffer is handed to a library call, or when lowering ends.
"""
from __future__ import annotations

from typing import Optional, Sequence

import sympy
import torch

from inductor.ir.symbols import Expr, product, stride_expr, to_expr


def contiguous_strides(size: Sequence) -> list:
    """Row-major strides of `size`."""
    strides, running = [], sympy.Integer(1)
    for extent in reversed([to_expr(value) for value in size]):
        strides.append(running)
        running = running * extent
    return list(reversed(strides))


class Layout:
    """Device, dtype, size, stride and storage offset of a buffer."""

    def __init__(self, device: torch.device, dtype: torch.dtype, size: Sequence,
                 stride: Optional[Sequence] = None, offset=0, fixed: bool = True):
        self.device = device
        self.dtype = dtype
        self.size = [to_expr(value) for value in size]
        self.stride = [stride_expr(value) for value in stride] if stride is not None \
            else contiguous_strides(self.size)
        self.offset = to_expr(offset)
        self.fixed = fixed

    def index(self, index: Sequence[Expr]) -> Expr:
        """The storage offset of element `index`."""
        assert len(index) == len(self.size), (index, self.size)
        result = self.offset
        for position, stride, extent in zip(index, self.stride, self.size):
            if extent != 1:
                result = result + position * stride
        return result

    def decide(self, stride: Sequence) -> None:
        """Give a flexible layout these strides (ignored once fixed)."""
        if not self.fixed:
            self.stride = [stride_expr(value) for value in stride]

    def freeze(self) -> "Layout":
        """Promise the current strides from now on."""
        self.fixed = True
        return self

    def numel(self) -> Expr:
        return product(self.size)

    def storage_size(self) -> Expr:
        """Elements of storage the layout spans (offset included)."""
        if any(extent == 0 for extent in self.size):
            return sympy.Integer(0)
        span = sum(((extent - 1) * stride for extent, stride in zip(self.size, self.stride)),
                   sympy.Integer(0))
        return self.offset + span + 1

    def is_contiguous(self) -> bool:
        return all(extent == 1 or stride == expected for extent, stride, expected in
                   zip(self.size, self.stride, contiguous_strides(self.size)))

    def __repr__(self) -> str:
        kind = "Fixed" if self.fixed else "Flexible"
        dtype = str(self.dtype).replace("torch.", "")
        offset = f", offset={self.offset}" if self.offset != 0 else ""
        return (f"{kind}Layout({self.device.type}, {dtype}, size={list(self.size)}, "
                f"stride={list(self.stride)}{offset})")
