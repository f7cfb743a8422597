"""The expression printer shared by the C++ and Triton code generators: index expressions,
constants and compute dtypes.

Input: sympy index expressions over kernel loop variables; Python constants; torch dtypes.
Output: C-like source text. Index expressions are identical in both languages but for the
integer division operator (`/` in C++, `//` in Triton; both truncate, the same on the
non-negative values `FloorDiv` and `ModularIndexing` take); constants differ in the words a
language has for true, false, NaN, infinity and integers of a width (`LiteralSpelling`,
given by `codegen/cpp/expressions.py` and `codegen/triton/expressions.py`); the compute dtype
is the one values of a dtype are held in while computing.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import sympy
import torch

from inductor.ir.symbols import FloorDiv, ModularIndexing, product

HALF_TYPES = (torch.float16, torch.bfloat16)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype values of `dtype` are held in while computing (half types as float32)."""
    return torch.float32 if dtype in HALF_TYPES else dtype


@dataclasses.dataclass(frozen=True)
class LiteralSpelling:
    """How a language writes constants: `true`/`false`, `nan` and `infinity` (format strings
    of `{suffix}`, the float type's literal suffix, and for infinity `{sign}`), the suffix of
    each float compute dtype, and `integer(value, dtype)`."""

    true: str
    false: str
    nan: str
    infinity: str
    float_suffix: dict
    integer: Callable[[int, torch.dtype], str]


def literal_text(value, dtype: torch.dtype, spelling: LiteralSpelling) -> str:
    """`value` as a constant of `dtype`'s compute type, in `spelling`'s language."""
    dtype = compute_dtype(dtype)
    if dtype == torch.bool:
        return spelling.true if value else spelling.false
    if not dtype.is_floating_point:
        return spelling.integer(int(value), dtype)
    value = float(value)
    suffix = spelling.float_suffix.get(dtype, "")
    if math.isnan(value):
        return spelling.nan.format(suffix=suffix)
    if math.isinf(value):
        return spelling.infinity.format(sign="-" if value < 0 else "", suffix=suffix)
    return repr(value) + suffix     # a finite float's repr always has a "." or an exponent


def index_text(expr, division: str) -> str:
    """An index expression as source text, `division` spelling integer division."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return expr.name
    if isinstance(expr, FloorDiv):
        return f"({index_text(expr.args[0], division)} {division} " \
               f"{_operand_text(expr.args[1], division)})"
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = expr.args
        inner = index_text(base, division) if divisor == 1 else \
            f"({index_text(base, division)} {division} {_operand_text(divisor, division)})"
        return f"({inner} % {_operand_text(modulus, division)})"
    if isinstance(expr, sympy.Add):
        return _sum_text(expr, division)
    if isinstance(expr, sympy.Mul):
        coefficient, rest = expr.as_coeff_Mul()
        factors = [index_text(factor, division) for factor in sympy.Mul.make_args(rest)]
        if coefficient == -1:
            return f"(-{'*'.join(factors)})"
        if coefficient != 1:
            factors.insert(0, str(int(coefficient)))
        return "*".join(factors)
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:
        return "*".join([index_text(expr.base, division)] * int(expr.exp))
    raise NotImplementedError(f"cannot print index {expr}")


def _operand_text(expr, division: str) -> str:
    """A divisor or modulus: parenthesised unless a number or a symbol (a symbolic size's
    product, `x / (2*s0)`, would otherwise divide by 2 and multiply by s0)."""
    text = index_text(expr, division)
    return text if expr.is_Integer or isinstance(expr, sympy.Symbol) or \
        text.startswith("(") and text.endswith(")") and text.count("(") == 1 else f"({text})"


def _sum_text(expr: sympy.Add, division: str) -> str:
    terms = sorted(expr.args, key=lambda term: (term.is_Integer, sympy.default_sort_key(term)))
    text = ""
    for term in terms:
        coefficient, _rest = term.as_coeff_Mul()
        if text and coefficient < 0:
            text += f" - {index_text(-term, division)}"
        elif text:
            text += f" + {index_text(term, division)}"
        else:
            text = index_text(term, division)
    return f"({text})"


def flat_index(flat, sizes: list) -> list:
    """The index of each of `sizes`' dimensions at position `flat` of their row-major order
    (the scan printers' lines: `codegen/cpp/scan.py`, `codegen/triton/scan.py`)."""
    result = []
    for position, size in enumerate(sizes):
        stride = product(sizes[position + 1:])
        result.append(FloorDiv(flat, stride) if position == 0 else
                      ModularIndexing(flat, stride, size))
    return result
