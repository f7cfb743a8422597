"""Triton spellings of index expressions, dtypes and literals.

Input: sympy index expressions over kernel loop variables, torch dtypes, Python constants.
Output: Triton source text. `FloorDiv` and `ModularIndexing` print as `//` and `%` (Triton's
integer division truncates like C, which is the same on the non-negative values they take
in unmasked lanes).
"""
from __future__ import annotations

import math

import sympy
import torch

from inductor.ir.symbols import FloorDiv, ModularIndexing

TRITON_TYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.bfloat16: "tl.bfloat16",
    torch.float16: "tl.float16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.int16: "tl.int16", torch.int32: "tl.int32", torch.int64: "tl.int64",
    torch.bool: "tl.int1",
}
HALF_TYPES = (torch.float16, torch.bfloat16)


def triton_type(dtype: torch.dtype) -> str:
    """The `tl` dtype of `dtype`."""
    if dtype not in TRITON_TYPES:
        raise NotImplementedError(f"no Triton type for {dtype}")
    return TRITON_TYPES[dtype]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype values of `dtype` are held in while computing (half types as float32)."""
    return torch.float32 if dtype in HALF_TYPES else dtype


def index_text(expr) -> str:
    """An index expression as Triton source."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return expr.name
    if isinstance(expr, FloorDiv):
        return f"({index_text(expr.args[0])} // {index_text(expr.args[1])})"
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = expr.args
        inner = index_text(base) if divisor == 1 else \
            f"({index_text(base)} // {index_text(divisor)})"
        return f"({inner} % {index_text(modulus)})"
    if isinstance(expr, sympy.Add):
        return _sum_text(expr)
    if isinstance(expr, sympy.Mul):
        coefficient, rest = expr.as_coeff_Mul()
        factors = [index_text(factor) for factor in sympy.Mul.make_args(rest)]
        if coefficient == -1:
            return f"(-{'*'.join(factors)})"
        if coefficient != 1:
            factors.insert(0, str(int(coefficient)))
        return "*".join(factors)
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        return "*".join([index_text(expr.base)] * int(expr.exp))
    raise NotImplementedError(f"cannot print index {expr}")


def _sum_text(expr: sympy.Add) -> str:
    terms = sorted(expr.args, key=lambda term: (term.is_Integer, sympy.default_sort_key(term)))
    text = ""
    for term in terms:
        coefficient, _rest = term.as_coeff_Mul()
        if text and coefficient < 0:
            text += f" - {index_text(-term)}"
        elif text:
            text += f" + {index_text(term)}"
        else:
            text = index_text(term)
    return f"({text})"


def python_literal(value, dtype: torch.dtype) -> str:
    """`value` as a Python literal (float, int or bool) of the compute type of `dtype`."""
    dtype = compute_dtype(dtype)
    if dtype == torch.bool:
        return "True" if value else "False"
    if dtype.is_floating_point:
        value = float(value)
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return f'float("{"-" if value < 0 else ""}inf")'
        return repr(value)
    return str(_wrapped(int(value), dtype))


def _wrapped(value: int, dtype: torch.dtype) -> int:
    """`value` wrapped into `dtype`'s range, as a C cast of a wider integer wraps."""
    information = torch.iinfo(dtype)
    span = information.max - information.min + 1
    return (value - information.min) % span + information.min


def literal(value, dtype: torch.dtype) -> tuple[str, bool]:
    """(Triton text of a constant of `dtype`'s compute type, whether it is a bare Python
    literal). Float32 and bool constants are bare literals (Triton types them exactly);
    every other dtype is spelled `tl.full([], value, dtype)` so it keeps its width."""
    dtype = compute_dtype(dtype)
    if dtype.is_floating_point and float(value) == 0 and math.copysign(1.0, float(value)) < 0:
        # Triton reads a literal -0.0 (bare or in `tl.full`) as +0.0 (`x / -0.0` gave +inf
        # for x > 0): spell negative zero by its bits, the sign bit alone
        bits = {torch.float32: ("-2147483648", "tl.int32"),
                torch.float64: ("-9223372036854775808", "tl.int64")}[dtype]
        return f"tl.full([], {bits[0]}, {bits[1]}).to({triton_type(dtype)}, bitcast=True)", \
            False
    text = python_literal(value, dtype)
    if dtype in (torch.float32, torch.bool):
        return text, True
    return f"tl.full([], {text}, {triton_type(dtype)})", False
