"""Stage "build", CPU side: loading generated Triton modules for Triton's interpreter.

Input: a module's source file. Output: the module with its `@triton.jit` functions decorated
while `TRITON_INTERPRET=1` (so they run on CPU tensors through NumPy), and `libdevice`
replaced by `libdevice_on_cpu`: Triton's interpreter has no `libdevice`, so each function the
generated code calls is computed by the matching torch function on the lanes' values (the
same values eager computes). Triton itself must be imported before the variable is set, so
its own library stays compiled-mode.

This is how CI tests every Triton code path without a GPU (`JIT_CPU_BACKEND=triton`). The
shim reads interpreter values (`tensor.handle.data`, a NumPy array): an internal of Triton's
interpreter, checked here so a change fails with a clear message.
"""
from __future__ import annotations

import contextlib
import os
import types

import numpy
import torch

from inductor.ir.primitives import PRIMITIVES

# Each `libdevice.<f>` a primitive's Triton spelling names (`ir/primitives.py`) computes the
# primitive's torch reference; and the functions that generated code calls otherwise: the
# prelude (`codegen/triton/prelude.py`: erf's float64 path, fmod, copysign, nearbyint) and the
# handler's own methods (fmod, pow of floats). exp, log and sqrt: no generated code calls them
# through libdevice today (kept as they were).
CALLED_OTHERWISE = {
    1: {"erf": torch.erf, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt},
    2: {"fmod": torch.fmod, "pow": torch.pow},
    3: {},
}


def _libdevice_table(arity: int) -> dict:
    table = {row.triton[len("libdevice."):]: row.reference for row in PRIMITIVES
             if row.arity == arity and row.triton and row.triton.startswith("libdevice.")}
    return {**table, **CALLED_OTHERWISE[arity]}


UNARY, BINARY, TERNARY = (_libdevice_table(arity) for arity in (1, 2, 3))


class InterpreterChanged(RuntimeError):
    """Triton's interpreter no longer exposes values the way this shim expects (a newer
    Triton). The CPU Triton backend cannot run; use `inductor.config.cpu_backend = "cpp"`."""


def _lanes(value):
    """(torch tensor of the lanes, the value's Triton type) of an interpreter value."""
    handle = getattr(value, "handle", None)
    data = getattr(handle, "data", None)
    if not isinstance(data, numpy.ndarray):
        raise InterpreterChanged(f"unexpected interpreter value {type(value).__name__}")
    return torch.from_numpy(numpy.ascontiguousarray(data)), value.type


def _wrap(result: torch.Tensor, types_: list):
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    scalar = types_[0].scalar
    shapes = [list(kind.shape) for kind in types_ if isinstance(kind, tl.block_type)]
    if shapes:
        shape = list(torch.broadcast_shapes(*[tuple(shape) for shape in shapes]))
        kind = tl.block_type(scalar, shape)
        data = result.expand(shape) if list(result.shape) != shape else result
    else:
        kind, data = scalar, result.reshape(-1)[:1]
    return tl.tensor(TensorHandle(numpy.ascontiguousarray(data.numpy()), scalar), kind)


def _elementwise(function):
    def call(*values):
        lanes, types_ = zip(*(_lanes(value) for value in values))
        with torch.no_grad():
            result = function(*lanes)
        return _wrap(result.to(lanes[0].dtype), list(types_))
    call.__name__ = getattr(function, "__name__", "libdevice_function")
    return call


def _block(data: numpy.ndarray, scalar):
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    data = numpy.ascontiguousarray(data)
    kind = tl.block_type(scalar, list(data.shape)) if data.ndim else scalar
    return tl.tensor(TensorHandle(data, scalar), kind)


def tree_reduce(input, axis, combine_fn, keep_dims=False):
    """`tl.reduce` for the interpreter, combining halves of the axis pairwise with NumPy
    (the interpreter's own reduce calls a custom combine function once per element)."""
    import triton.language as tl

    values = list(input) if isinstance(input, tuple) else [input]
    scalars = [value.dtype.scalar if hasattr(value.dtype, "scalar") else value.dtype
               for value in values]
    datas = [_lanes(value)[0].numpy() for value in values]
    # The interpreter splats a bool scalar (`tl.broadcast_to` of a comparison) into float32
    # lanes it still types int1; NumPy blocks of those lanes are refused as int1
    datas = [data != 0 if scalar == tl.int1 and data.dtype != numpy.bool_ else data
             for data, scalar in zip(datas, scalars)]
    while datas[0].shape[axis] > 1:
        length = datas[0].shape[axis]
        half = length // 2
        first = [_block(numpy.take(data, range(half), axis=axis), scalar)
                 for data, scalar in zip(datas, scalars)]
        second = [_block(numpy.take(data, range(half, 2 * half), axis=axis), scalar)
                  for data, scalar in zip(datas, scalars)]
        combined = combine_fn.fn(*first, *second)
        combined = combined if isinstance(combined, tuple) else (combined,)
        merged = [value.handle.data for value in combined]
        if length % 2:
            merged = [numpy.concatenate([data, numpy.take(old, [length - 1], axis=axis)],
                                        axis=axis) for data, old in zip(merged, datas)]
        datas = [data.astype(old.dtype, copy=False) for data, old in zip(merged, datas)]
    results = [_block(data if keep_dims else numpy.squeeze(data, axis=axis), scalar)
               for data, scalar in zip(datas, scalars)]
    return tuple(results) if isinstance(input, tuple) else results[0]


libdevice_on_cpu = types.SimpleNamespace(
    **{name: _elementwise(function) for name, function in {**UNARY, **BINARY, **TERNARY}.items()})


def enable_device_asserts() -> None:
    """Make `tl.device_assert` check in Triton's interpreter (bounds mode): Triton only
    emits asserts under its `debug` option, which the interpreter's builder keeps in a fixed
    options object (process-wide, like the rest of the interpreter's state). Overflow
    sanitizing stays off: under `debug` Triton asserts that no 8-, 16- or 32-bit `+`, `-`, `*`
    overflows, where eager's integer arithmetic wraps (after one test in bounds mode, every
    later interpreted kernel of the process raised `int32 overflow detected for operation
    mul` on integer powers, random-number hashes and index arithmetic)."""
    import dataclasses

    from triton.runtime import interpreter
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not hasattr(options, "debug"):
        raise InterpreterChanged("Triton's interpreter keeps no `debug` option on its builder")
    if not options.debug or getattr(options, "sanitize_overflow", False):
        builder.options = dataclasses.replace(options, debug=True, sanitize_overflow=False)


def type_comparisons_as_bool() -> None:
    """Make the interpreter's comparisons give values typed `int1`. Its builder types a
    comparison's result like its operands (`x != 0` of a float32 scalar holds NumPy bools
    typed float32), and broadcasting such a scalar to a block (`splat`) converts its lanes to
    that type: `&` or `|` of a bool block and a compared scalar then met float32 lanes
    (`ufunc 'bitwise_and' not supported`, graph fuzzer class 11). Process-wide, like the
    interpreter's other state; idempotent."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle = getattr(interpreter, "TensorHandle", None)
    if builder is None or handle is None:
        raise InterpreterChanged("Triton's interpreter has no InterpreterBuilder/TensorHandle")
    if getattr(builder, "comparisons_typed_bool", False):
        return
    names = [name for name in vars(builder) if name.startswith(("create_icmp", "create_fcmp"))]
    if not names:
        raise InterpreterChanged("Triton's interpreter builder has no create_icmp*/create_fcmp*")
    for name in names:
        def compare(self, lhs, rhs, original=getattr(builder, name)):
            result = original(self, lhs, rhs)
            return handle(numpy.asarray(result.data, dtype=numpy.bool_), tl.int1)
        setattr(builder, name, compare)
    builder.comparisons_typed_bool = True


def scalar_arguments_as_indices() -> None:
    """Make an interpreted kernel's integer arguments usable as `range` bounds with NumPy 2.
    Triton 3.6's interpreter wraps an int argument as a one-lane array (shape `(1,)`) and
    converts it with `int(data)`, which NumPy 2 refuses ("only 0-dimensional arrays can be
    converted to Python scalars"): `for roffset in range(0, s0, RBLOCK)` over a runtime size
    failed. Later Triton squeezes first, as this does. Wraps the interpreter's per-kernel
    patching of `tl.tensor`, so the fix is restored with it; process-wide and idempotent."""
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None:
        raise InterpreterChanged("Triton's interpreter has no _patch_lang_tensor")
    if getattr(original, "squeezes_indices", False):
        return

    def patch_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patch_tensor.squeezes_indices = True
    interpreter._patch_lang_tensor = patch_tensor


@contextlib.contextmanager
def interpreting():
    """Decorate the functions defined inside the block for Triton's interpreter."""
    import triton  # noqa: F401  (Triton's own library must load compiled-mode first)
    import triton.language  # noqa: F401

    type_comparisons_as_bool()
    scalar_arguments_as_indices()
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
