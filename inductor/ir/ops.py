"""The swappable `ops` handler through which loop bodies compute.

Input: calls such as `ops.load("buf0", index)` or `ops.add(a, b)` made by a loop body's
`inner_fn`. Output: whatever the installed handler makes of them: recorded dependencies, an
operation count, a printed expression, or C++/Triton source. The same body is run once per
purpose, under a different handler each time.

`OPERATIONS` is the vocabulary every handler understands; lowerings use nothing else.
Operand values of arithmetic ops share one dtype (the lowering inserts `to_dtype` first);
comparisons and `isnan`-like tests return bool.
"""
from __future__ import annotations

import contextlib
from typing import Callable

# Functions eager's CPU kernels compute for float32 and float64 through MKL's vector math
# library (`at::vml`, measured bit for bit): `vml_<name>` computes `<name>` with VML's bits on
# the C++ backend (see `inductor/vml.py`), and as `<name>` elsewhere.
VML_FUNCTIONS = ("exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "asin", "acos",
                 "atan", "erf", "erfc")
UNARY = (
    "neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "erf", "erfc", "erfinv", "sigmoid", "reciprocal", "floor", "ceil", "trunc",
    "round", "sign", "signbit", "isnan", "isinf", "isfinite", "logical_not", "bitwise_not",
    "lgamma", "square",
) + tuple("vml_" + name for name in VML_FUNCTIONS)
BINARY = (
    "add", "sub", "mul", "truediv", "floordiv", "truncdiv", "remainder", "fmod", "pow",
    "atan2", "maximum", "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "left_shift", "right_shift", "copysign", "hypot", "nextafter",
)
# fma(a, b, c) = a * b + c rounded once: eager's CPU and CUDA kernels compute add/sub with
# alpha, addcmul and lerp this way, and matching them bit for bit needs the same rounding.
TERNARY = ("fma",)
SPECIAL = ("load", "constant", "index_expr", "to_dtype", "bitcast", "where", "masked",
           "indirect_indexing", "random")
OPERATIONS = UNARY + BINARY + TERNARY + SPECIAL


class OpsHandler:
    """Base class of handlers; `default` receives any op a subclass does not define."""

    def default(self, name: str, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no operation {name!r}")

    def __getattr__(self, name: str):
        if name in OPERATIONS:
            return lambda *args, **kwargs: self.default(name, *args, **kwargs)
        raise AttributeError(name)


_handlers: list = []


@contextlib.contextmanager
def use_handler(handler):
    """Install `handler` for the `ops` calls made inside the block."""
    _handlers.append(handler)
    try:
        yield handler
    finally:
        _handlers.pop()


def current_handler():
    """The innermost installed handler."""
    if not _handlers:
        raise RuntimeError("an `ops` call was made outside of any handler (use_handler)")
    return _handlers[-1]


def _dispatcher(name: str) -> Callable:
    def call(*args, **kwargs):
        return getattr(_handlers[-1] if _handlers else current_handler(), name)(*args, **kwargs)
    call.__name__ = name
    return call


class _OpsProxy:
    """`ops.name(...)` calls `name` on the handler current at call time, so `ops.add` may be
    passed around as a function before any handler is installed."""

    def __init__(self):
        for name in OPERATIONS:
            setattr(self, name, _dispatcher(name))

    def __getattr__(self, name: str) -> Callable:
        raise AttributeError(f"`ops` has no operation {name!r}")


ops = _OpsProxy()
