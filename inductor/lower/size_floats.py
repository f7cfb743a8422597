"""Python floats a graph computes from symbolic sizes (stage "lower").

Input: an fx node whose value is a `SymFloat` (BatchNorm's backward decomposition multiplies
by `1 / n`, the unbiased variance by `n / (n - 1)`, with `n` a product of sizes) and its
arguments as the lowering holds them (size expressions, Python numbers, other `SizeFloat`s).
Output: a `SizeFloat`, a scalar operand the kernel computes from the size symbols it takes
as arguments, with the same float64 operations, in the same order, as Python's arithmetic
on the sizes of the call (a static variant bakes that float in as a constant; here each
call's value is the one a static compile for its sizes would have baked in). Sizes are exact
in float64 (below 2**53), so int-to-float conversions round nothing and each operation
rounds once, as Python's does.

Consumers are limited to ops whose lowering treats a Python float scalar one way on every
device (`CONSUMERS`); any other use is refused (`NotSymbolic`: a static variant per size,
as before), as is an arithmetic this module does not model.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import sympy
import torch

from inductor.ir.ops import ops
from inductor.size_variants import NotSymbolic

aten = torch.ops.aten

# ops that take a size float as a scalar operand through `make_pointwise` and treat it as a
# Python float constant (`aten.div`'s CUDA path takes a reciprocal of Python numbers: not here)
CONSUMERS = frozenset({aten.mul.Tensor, aten.mul.Scalar})

_ARITHMETIC: dict[Any, Callable] = {
    operator.truediv: lambda a, b: ops.truediv(a, b),
    operator.mul: lambda a, b: ops.mul(a, b),
    operator.add: lambda a, b: ops.add(a, b),
    operator.sub: lambda a, b: ops.sub(a, b),
}


class SizeFloat:
    """A float64 scalar computed in the kernel from size symbols: `emit()` makes its value
    with the current ops handler. `text`: the expression, for messages."""

    __slots__ = ("emit", "text")

    def __init__(self, emit: Callable[[], Any], text: str):
        self.emit = emit
        self.text = text

    def __float__(self):   # a lowering that needs the number itself: per size
        raise NotSymbolic(f"a size computed as a SymFloat ({self.text}) read as a number")

    def __repr__(self) -> str:
        return f"SizeFloat({self.text})"


def _operand(value, name: str) -> Callable[[], Any]:
    if isinstance(value, SizeFloat):
        return value.emit
    if isinstance(value, sympy.Expr) and value.is_integer:
        return lambda: ops.to_dtype(ops.index_expr(value, torch.int64), torch.float64,
                                    torch.int64)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and \
            abs(value) < 2 ** 53:
        number = float(value)
        return lambda: ops.constant(number, torch.float64)
    raise NotSymbolic(f"a size computed as a SymFloat ({name}) from a "
                      f"{type(value).__name__}")


def size_float(node, args: tuple, kwargs: dict) -> SizeFloat:
    """The `SizeFloat` of a node whose value is a SymFloat; `NotSymbolic` where its
    arithmetic is not modelled."""
    if kwargs:
        raise NotSymbolic(f"a size computed as a SymFloat ({node.name}) with keywords")
    if node.target is torch.sym_float and len(args) == 1:
        return SizeFloat(_operand(args[0], node.name), f"float({args[0]})")
    if node.target is operator.neg and len(args) == 1:
        inner = _operand(args[0], node.name)
        return SizeFloat(lambda: ops.neg(inner()), f"-({args[0]})")
    combine = _ARITHMETIC.get(node.target)
    if combine is None or len(args) != 2:
        raise NotSymbolic(f"a size computed as a SymFloat ({node.name})")
    left, right = (_operand(value, node.name) for value in args)
    return SizeFloat(lambda: combine(left(), right()),
                     f"({args[0]}) {node.target.__name__} ({args[1]})")
