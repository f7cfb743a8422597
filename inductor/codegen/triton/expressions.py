"""Triton spellings of index expressions, dtypes and literals (`codegen/expressions.py`
prints them).

Input: sympy index expressions over kernel loop variables, torch dtypes, Python constants.
Output: Triton source text. `FloorDiv` and `ModularIndexing` print as `//` and `%` (Triton's
integer division truncates like C, which is the same on the non-negative values they take
in unmasked lanes; `codegen/expressions.py`, shared with C++).
"""
from __future__ import annotations

import math

import torch

from inductor.codegen import expressions as shared
from inductor.codegen.expressions import compute_dtype

TRITON_TYPES = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.bfloat16: "tl.bfloat16",
    torch.float16: "tl.float16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.int16: "tl.int16", torch.int32: "tl.int32", torch.int64: "tl.int64",
    torch.bool: "tl.int1",
}


def triton_type(dtype: torch.dtype) -> str:
    """The `tl` dtype of `dtype`."""
    if dtype not in TRITON_TYPES:
        raise NotImplementedError(f"no Triton type for {dtype}")
    return TRITON_TYPES[dtype]


def index_text(expr) -> str:
    """An index expression as Triton source."""
    return shared.index_text(expr, "//")


def python_literal(value, dtype: torch.dtype) -> str:
    """`value` as a Python literal (float, int or bool) of the compute type of `dtype`."""
    return shared.literal_text(value, dtype, SPELLING)


def _wrapped(value: int, dtype: torch.dtype) -> int:
    """`value` wrapped into `dtype`'s range, as a C cast of a wider integer wraps."""
    information = torch.iinfo(dtype)
    span = information.max - information.min + 1
    return (value - information.min) % span + information.min


SPELLING = shared.LiteralSpelling(
    true="True", false="False", nan='float("nan")', infinity='float("{sign}inf")',
    float_suffix={}, integer=lambda value, dtype: str(_wrapped(value, dtype)))


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
