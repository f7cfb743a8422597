"""C++ spellings of index expressions, dtypes and literals (`codegen/expressions.py`
prints them).

Input: sympy index expressions over kernel loop variables, torch dtypes, Python constants.
Output: C++ text. Indices are `int64_t` throughout (tensors past 2**31 elements index
correctly); `FloorDiv` and `ModularIndexing` print as `/` and `%`, valid because their
operands are non-negative by construction (`codegen/expressions.py`, shared with Triton).
"""
from __future__ import annotations

import torch

from inductor.codegen import expressions as shared
from inductor.codegen.expressions import compute_dtype  # noqa: F401 (cpp/ops.py's)

C_TYPES = {
    torch.float32: "float", torch.float64: "double", torch.bfloat16: "uint16_t",
    torch.float16: "uint16_t", torch.int8: "int8_t", torch.uint8: "uint8_t",
    torch.int16: "int16_t", torch.int32: "int32_t", torch.int64: "int64_t",
    torch.bool: "bool",
}


def storage_type(dtype: torch.dtype) -> str:
    """The C++ type of one element in memory."""
    if dtype not in C_TYPES:
        raise NotImplementedError(f"no C++ type for {dtype}")
    return C_TYPES[dtype]


def index_text(expr) -> str:
    """An index expression as C++ (int64_t arithmetic)."""
    return shared.index_text(expr, "/")


def _integer_literal(value: int, dtype: torch.dtype) -> str:
    if dtype == torch.int64:
        return "INT64_MIN" if value == -2 ** 63 else f"{value}LL"
    return f"static_cast<{storage_type(dtype)}>({value}LL)"


SPELLING = shared.LiteralSpelling(
    true="true", false="false", nan='__builtin_nan{suffix}("")',
    infinity="{sign}__builtin_inf{suffix}()", float_suffix={torch.float32: "f"},
    integer=_integer_literal)


def literal(value, dtype: torch.dtype) -> str:
    """A constant of `dtype` (in its compute type) as C++."""
    return shared.literal_text(value, dtype, SPELLING)
