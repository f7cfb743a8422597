"""C++ spellings of index expressions, dtypes and literals.

Input: sympy index expressions over kernel loop variables, torch dtypes, Python constants.
Output: C++ text. Indices are `int64_t` throughout (tensors past 2**31 elements index
correctly); `FloorDiv` and `ModularIndexing` print as `/` and `%`, valid because their
operands are non-negative by construction.
"""
from __future__ import annotations

import math

import sympy
import torch

from inductor.ir.symbols import FloorDiv, ModularIndexing

C_TYPES = {
    torch.float32: "float", torch.float64: "double", torch.bfloat16: "uint16_t",
    torch.float16: "_Float16", torch.int8: "int8_t", torch.uint8: "uint8_t",
    torch.int16: "int16_t", torch.int32: "int32_t", torch.int64: "int64_t",
    torch.bool: "bool",
}
HALF_TYPES = (torch.float16, torch.bfloat16)


def storage_type(dtype: torch.dtype) -> str:
    """The C++ type of one element in memory."""
    if dtype not in C_TYPES:
        raise NotImplementedError(f"no C++ type for {dtype}")
    return C_TYPES[dtype]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype values of `dtype` are held in while computing (half types as float)."""
    return torch.float32 if dtype in HALF_TYPES else dtype


def index_text(expr) -> str:
    """An index expression as C++ (int64_t arithmetic)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return expr.name
    if isinstance(expr, FloorDiv):
        return f"({index_text(expr.args[0])} / {index_text(expr.args[1])})"
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = expr.args
        inner = index_text(base) if divisor == 1 else \
            f"({index_text(base)} / {index_text(divisor)})"
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


def literal(value, dtype: torch.dtype) -> str:
    """A constant of `dtype` (in its compute type) as C++."""
    dtype = compute_dtype(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        value = float(value)
        suffix = "f" if dtype == torch.float32 else ""
        if math.isnan(value):
            return f"__builtin_nan{suffix}(\"\")"
        if math.isinf(value):
            return f"{'-' if value < 0 else ''}__builtin_inf{suffix}()"
        text = repr(value)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"{text}{suffix}"
    value = int(value)
    c_type = storage_type(dtype)
    if dtype == torch.int64 and value == -2 ** 63:
        return "INT64_MIN"
    return f"static_cast<{c_type}>({value}LL)" if dtype != torch.int64 else f"{value}LL"
