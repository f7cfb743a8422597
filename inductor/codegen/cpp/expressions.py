"""C++ spellings of index expressions, dtypes and literals.

Input: sympy index expressions over kernel loop variables, torch dtypes, Python constants.
Output: C++ text. Indices are `int64_t` throughout (tensors past 2**31 elements index
correctly); `FloorDiv` and `ModularIndexing` print as `/` and `%`, valid because their
operands are non-negative by construction (`codegen/index_printer.py`, shared with Triton).
"""
from __future__ import annotations

import math

import torch

from inductor.codegen import index_printer
from inductor.codegen.index_printer import compute_dtype  # noqa: F401 (cpp/ops.py's)

C_TYPES = {
    torch.float32: "float", torch.float64: "double", torch.bfloat16: "uint16_t",
    torch.float16: "_Float16", torch.int8: "int8_t", torch.uint8: "uint8_t",
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
    return index_printer.index_text(expr, "/")


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
