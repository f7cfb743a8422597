"""The pointwise primitives of the loop IR: one row per operation, read by every stage.

Input: nothing (a table). Output: `PRIMITIVES`, from which derive the `ops` vocabulary
(`ir/ops.py`), the generic lowerings of float functions (`lower/math.py`), both code
generators' operators and library calls (`codegen/handler.py`, with `codegen/cpp/ops.py` and
`codegen/triton/ops.py`), the C++ prelude's libm declarations (`codegen/cpp/source.py`), the
Triton interpreter's `libdevice` stand-ins (`runtime/triton_interpret.py`) and the op sweep
(`tests/inductor/test_op_sweep.py`).

Columns: `name` (the `ops.<name>` of loop bodies), `arity`, `dtypes` (the dtype rule below),
`operator` (the infix operator both languages spell it with: C's and Python's agree),
`cpp` (the function a C++ kernel calls with the operands: a libm function or `__builtin_*`,
`<cpp>f` for float32, or a prelude overload `jit_*`, one name for every type), `triton` (the
function a Triton kernel calls: `tl.*`, `libdevice.*` or a prelude helper `jit_*`), `reference`
(the torch function eager computes), `cpp_missing` and `triton_missing` (why that code
generator cannot compute it, where it cannot), `cpp_vector` (False where the C++ prelude
declares the libm function without its libmvec vector variants), `vml` (MKL VML's name of the
function, `vms<vml>`/`vmd<vml>`, where eager's CPU kernels compute float32 and float64 through
VML: `ops.vml_<name>`, `inductor/vml.py`) and `lowered` (False where no ATen op lowers to
it). Where a row has no spelling for a code generator, that generator's handler has text of
its own (integer and float paths, masks, rounding; `codegen/*/ops.py`).
A module of data: it imports only torch, so every stage may read it (the runtime too).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

# Dtype rules: FLOAT computes in floating point (the lowering promotes integer and bool
# operands to the default float); SAME keeps the operands' dtype, any dtype; BOOL gives bool
# for operands of any dtype; INTEGER takes integer and bool operands only.
FLOAT, SAME, BOOL, INTEGER = "float", "same", "bool", "integer"


@dataclass(frozen=True)
class Primitive:
    """One pointwise operation of the loop IR (see the module docstring for the columns)."""

    name: str
    arity: int
    dtypes: str
    cpp: Optional[str]
    triton: Optional[str]
    reference: Callable
    cpp_missing: str = ""
    triton_missing: str = ""
    operator: Optional[str] = None
    cpp_vector: bool = True
    vml: Optional[str] = None
    lowered: bool = True

    def result_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """The dtype of the result for operands of `dtype` (a code generator's compute
        dtype: the lowering has converted integer operands of float functions already)."""
        return torch.bool if self.dtypes == BOOL else dtype


def fused_multiply_add(a, b, c):
    """Nearly one rounding (Triton's interpreter's own fma is NumPy's `a * b + c`, two
    roundings): for float32 the product is exact in float64 and only the sum
    rounds twice, which rarely ends one ulp away from a true fused multiply-add; float64
    operands round twice (the Triton interpreter's `libdevice.fma`)."""
    return (a.double() * b.double() + c.double()).to(a.dtype)


def _floordiv(a, b):
    return torch.div(a, b, rounding_mode="floor")


def _truncdiv(a, b):
    return torch.div(a, b, rounding_mode="trunc")


def _row(name, arity, dtypes, cpp=None, triton=None, reference=None, **extra) -> Primitive:
    return Primitive(name, arity, dtypes, cpp, triton,
                     reference if reference is not None else getattr(torch, name), **extra)


_U, _B = 1, 2
PRIMITIVES = (
    _row("neg", _U, SAME), _row("abs", _U, SAME, None, "tl.abs"),
    _row("exp", _U, FLOAT, "exp", "tl.exp", vml="Exp"),
    _row("exp2", _U, FLOAT, "exp2", "tl.exp2"),
    _row("expm1", _U, FLOAT, "expm1", "libdevice.expm1"),
    _row("log", _U, FLOAT, "log", "tl.log", vml="Ln"),
    _row("log2", _U, FLOAT, "log2", "tl.log2", vml="Log2"),
    _row("log10", _U, FLOAT, "log10", "libdevice.log10", vml="Log10"),
    _row("log1p", _U, FLOAT, "log1p", "libdevice.log1p"),
    _row("sqrt", _U, FLOAT, "__builtin_sqrt", vml="Sqrt"),  # Triton: tl.sqrt_rn for float32
    _row("rsqrt", _U, FLOAT, None, "libdevice.rsqrt"),
    _row("sin", _U, FLOAT, "sin", "libdevice.sin", vml="Sin"),
    _row("cos", _U, FLOAT, "cos", "libdevice.cos", vml="Cos"),
    _row("tan", _U, FLOAT, "tan", "libdevice.tan", vml="Tan"),
    _row("tanh", _U, FLOAT, "tanh", "libdevice.tanh", vml="Tanh"),
    _row("asin", _U, FLOAT, "asin", "libdevice.asin", vml="Asin"),
    _row("acos", _U, FLOAT, "acos", "libdevice.acos", vml="Acos"),
    _row("atan", _U, FLOAT, "atan", "libdevice.atan", vml="Atan"),
    _row("sinh", _U, FLOAT, "sinh", "libdevice.sinh"),
    _row("cosh", _U, FLOAT, "cosh", "libdevice.cosh"),
    _row("asinh", _U, FLOAT, "asinh", "libdevice.asinh"),
    _row("acosh", _U, FLOAT, "acosh", "libdevice.acosh"),
    _row("atanh", _U, FLOAT, "atanh", "libdevice.atanh"),
    _row("erf", _U, FLOAT, "erf", "jit_erf", vml="Erf"),  # libdevice's erff bits (prelude.py)
    _row("erfc", _U, FLOAT, "erfc", "libdevice.erfc", vml="Erfc"),
    _row("erfinv", _U, FLOAT, None, "libdevice.erfinv", lowered=False,
         cpp_missing="glibc has no erfinv; aten.erfinv has no lowering (an eager kernel runs "
                     "it), so no loop body asks for it"),
    _row("sigmoid", _U, FLOAT), _row("reciprocal", _U, FLOAT),
    _row("floor", _U, SAME, "__builtin_floor", "tl.floor"),
    _row("ceil", _U, SAME, "__builtin_ceil", "tl.ceil"),
    _row("trunc", _U, SAME, "__builtin_trunc", "libdevice.trunc"),
    _row("round", _U, SAME, "__builtin_nearbyint", "libdevice.nearbyint"),
    _row("sign", _U, SAME, "jit_sign"), _row("signbit", _U, BOOL, "jit_signbit"),
    _row("isnan", _U, BOOL),
    _row("isinf", _U, BOOL), _row("isfinite", _U, BOOL), _row("logical_not", _U, BOOL),
    _row("bitwise_not", _U, INTEGER),
    _row("lgamma", _U, FLOAT, "lgamma", "libdevice.lgamma", cpp_vector=False),  # none in libmvec
    _row("square", _U, SAME),
    _row("add", _B, SAME, operator="+"), _row("sub", _B, SAME, operator="-"),
    _row("mul", _B, SAME, operator="*"),
    _row("truediv", _B, FLOAT, reference=torch.div),
    _row("floordiv", _B, SAME, reference=_floordiv),
    _row("truncdiv", _B, SAME, reference=_truncdiv),
    _row("remainder", _B, SAME), _row("fmod", _B, SAME), _row("pow", _B, SAME),
    # atan2 is glibc's scalar one, as eager's loop over strided elements and its tails:
    # libmvec's vector atan2f gave pi/4 less an ulp for some x = y > 0 by position (graph
    # fuzzer seed 11238)
    _row("atan2", _B, FLOAT, "atan2", "libdevice.atan2", cpp_vector=False),
    _row("maximum", _B, SAME), _row("minimum", _B, SAME),
    _row("fmax", _B, SAME, "__builtin_fmax", "jit_fmax"),
    _row("fmin", _B, SAME, "__builtin_fmin", "jit_fmin"),
    _row("eq", _B, BOOL, operator="=="), _row("ne", _B, BOOL, operator="!="),
    _row("lt", _B, BOOL, operator="<"), _row("le", _B, BOOL, operator="<="),
    _row("gt", _B, BOOL, operator=">"), _row("ge", _B, BOOL, operator=">="),
    _row("logical_and", _B, BOOL), _row("logical_or", _B, BOOL), _row("logical_xor", _B, BOOL),
    _row("bitwise_and", _B, INTEGER, operator="&"), _row("bitwise_or", _B, INTEGER, operator="|"),
    _row("bitwise_xor", _B, INTEGER, operator="^"),
    _row("left_shift", _B, INTEGER, "jit_shift_left", reference=torch.bitwise_left_shift),
    _row("right_shift", _B, INTEGER, "jit_shift_right", reference=torch.bitwise_right_shift),
    _row("copysign", _B, FLOAT, "jit_copysign", "libdevice.copysign"),
    _row("hypot", _B, FLOAT, "hypot", "libdevice.hypot"),
    _row("nextafter", _B, FLOAT, "nextafter", "libdevice.nextafter",
         cpp_vector=False),  # none in libmvec
    # fma(a, b, c) = a * b + c rounded once: eager's CPU and CUDA kernels compute add/sub
    # with alpha, addcmul and lerp this way, and matching them bit for bit needs the same
    # rounding.
    _row("fma", 3, SAME, "__builtin_fma", "libdevice.fma", reference=fused_multiply_add),
)
BY_NAME = {row.name: row for row in PRIMITIVES}
assert len(BY_NAME) == len(PRIMITIVES), "a primitive is listed twice"


def names(arity: int) -> tuple:
    """The primitives of `arity` operands, in table order."""
    return tuple(row.name for row in PRIMITIVES if row.arity == arity)
