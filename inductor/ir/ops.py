"""The swappable `ops` handler through which loop bodies compute.

Input: calls such as `ops.load("buf0", index)` or `ops.add(a, b)` made by a loop body's
`inner_fn`. Output: whatever the installed handler makes of them: recorded dependencies, an
operation count, a printed expression, or C++/Triton source. The same body is run once per
purpose, under a different handler each time.

`OPERATIONS` is the vocabulary every handler understands; lowerings use nothing else. Its
pointwise part derives from the table of primitives (`ir/primitives.py`).
Operand values of arithmetic ops share one dtype (the lowering inserts `to_dtype` first);
comparisons and `isnan`-like tests return bool.
"""
from __future__ import annotations

import contextlib
from typing import Callable

from inductor.ir import primitives

# Functions eager's CPU kernels compute for float32 and float64 through MKL's vector math
# library (`at::vml`, measured bit for bit; the table's `vml` column): `vml_<name>` computes
# `<name>` with VML's bits on the C++ backend (see `inductor/vml.py`), and as `<name>`
# elsewhere.
VML_FUNCTIONS = tuple(row.name for row in primitives.PRIMITIVES if row.vml)
UNARY = primitives.names(1) + tuple("vml_" + name for name in VML_FUNCTIONS)
BINARY = primitives.names(2)
TERNARY = primitives.names(3)
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
