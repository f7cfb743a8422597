"""Lowerings of pointwise math: arithmetic, comparisons, logic, transcendental functions,
casts, `where`, `clamp` and constant fills.

Input: ATen pointwise ops with lowered operands. Output: `Pointwise` bodies (through
`make_pointwise`) with eager's type promotion; integer division and modulo follow torch's
floor/trunc rules and NaN propagates through `maximum`, `minimum` and `clamp`.
"""
from __future__ import annotations

import sympy
import torch

from inductor.config import config
from inductor.ir.nodes import Pointwise, TensorBox
from inductor.ir.ops import ops
from inductor.ir.primitives import FLOAT, PRIMITIVES
from inductor.ir.symbols import to_expr
from inductor.lower.elementwise import (broadcast_shapes, cast, constant_box, is_scalar,
                                        is_tensor, make_pointwise, opmath_dtype,
                                        result_type, value_loader)
from inductor.lower.registry import register_lowering
from inductor.vml import VML

aten = torch.ops.aten
prims = torch.ops.prims


def _float_type(*operands) -> torch.dtype:
    """Promoted dtype, with integers and bool going to the default float (sqrt, exp...)."""
    dtype = result_type(*operands)
    return dtype if dtype.is_floating_point or dtype.is_complex else torch.get_default_dtype()


def _unary_float(name: str):
    def lower(x):
        dtype = _float_type(x)
        return make_pointwise(getattr(ops, name), x, dtype=dtype,
                              compute_dtype=opmath_dtype(dtype))
    return lower


# The float functions of one operand (`ir/primitives.py`), each lowered from its aten op
FLOAT_UNARY = tuple(row.name for row in PRIMITIVES
                    if row.arity == 1 and row.dtypes == FLOAT and row.lowered)
for _name in FLOAT_UNARY:
    register_lowering(getattr(aten, _name))(_unary_float(_name))


@register_lowering(VML)
def vml(x, name):
    """A float op eager computes through MKL VML (`inductor/vml.py`): `ops.vml_<name>` on the
    C++ backend, which calls VML for eager's bits; the plain op where Triton runs it."""
    dtype = x.get_dtype()
    exact = x.get_device().type == "cpu" and config.cpu_backend == "cpp"
    return make_pointwise(getattr(ops, f"vml_{name}" if exact else name), x, dtype=dtype,
                          compute_dtype=dtype)


def _bool_test(name: str):
    def lower(x):
        return make_pointwise(getattr(ops, name), x, dtype=torch.bool,
                              result_dtype=torch.bool)
    return lower


for _name in ("isnan", "isinf", "signbit"):
    register_lowering(getattr(aten, _name))(_bool_test(_name))


def _keep_dtype(name: str):
    def lower(x):
        if x.get_dtype() == torch.bool and name in ("abs", "sign"):
            return x if name == "abs" else cast(x, torch.bool)
        return make_pointwise(getattr(ops, name), x)
    return lower


for _name in ("neg", "abs", "sign", "square"):
    register_lowering(getattr(aten, _name))(_keep_dtype(_name))


def _rounding(name: str):
    def lower(x):
        if not x.get_dtype().is_floating_point:
            return x
        return make_pointwise(getattr(ops, name), x)
    return lower


for _name in ("floor", "ceil", "trunc", "round"):
    register_lowering(getattr(aten, _name), overloads_only=False)(_rounding(_name))


@register_lowering(aten.round.decimals)
def round_decimals(x, *, decimals=0):
    """Eager's kernel: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for
    negative d, in the op-math type."""
    if decimals == 0 or not x.get_dtype().is_floating_point:
        return _rounding("round")(x)
    compute = opmath_dtype(x.get_dtype())
    scale = float(10 ** abs(decimals))

    def body(value):
        factor = ops.constant(scale, compute)
        if decimals > 0:
            return ops.truediv(ops.round(ops.mul(value, factor)), factor)
        return ops.mul(ops.round(ops.truediv(value, factor)), factor)
    return make_pointwise(body, x)


@register_lowering(aten._neg_view)
def neg_view(x):
    """A view with the negative bit set in eager; its value is what matters here (generated
    code reads memory directly, so the bit would otherwise be lost)."""
    return make_pointwise(ops.neg, x)


@register_lowering(aten.frac)
def frac(x):
    return make_pointwise(lambda value: ops.sub(value, ops.trunc(value)), x)


@register_lowering(aten.relu)
def relu(x):
    if x.get_dtype() == torch.bool:
        return x
    dtype = x.get_dtype()
    compute = opmath_dtype(dtype)

    def body(value):
        zero = ops.constant(0, compute)
        return ops.where(ops.lt(value, zero), zero, value)
    return make_pointwise(body, x)


@register_lowering(aten.bitwise_not)
def bitwise_not(x):
    if x.get_dtype() == torch.bool:
        return make_pointwise(ops.logical_not, x, result_dtype=torch.bool)
    return make_pointwise(ops.bitwise_not, x)


@register_lowering(aten.logical_not)
def logical_not(x):
    return make_pointwise(ops.logical_not, x, dtype=torch.bool, result_dtype=torch.bool)


def _binary(name: str):
    def lower(a, b):
        return make_pointwise(getattr(ops, name), a, b)
    return lower


for _name in ("maximum", "minimum", "fmax", "fmin"):
    register_lowering(getattr(aten, _name))(_binary(_name))


def _float_binary(name: str):
    def lower(a, b):
        dtype = _float_type(a, b)
        return make_pointwise(getattr(ops, name), a, b, dtype=dtype,
                              compute_dtype=opmath_dtype(dtype))
    return lower


for _name in ("copysign", "hypot", "atan2"):
    register_lowering(getattr(aten, _name))(_float_binary(_name))


@register_lowering(aten.nextafter)
def nextafter(a, b):
    """The next value after `a` toward `b` in the result's own dtype. float16 and bfloat16
    compute in float32, whose next value is not theirs (float16 `nextafter(1, 2)` is
    1.0009765625 in eager, 1 rounded back from float32), so those run through eager's kernel."""
    if _float_type(a, b) in (torch.float16, torch.bfloat16):
        raise NotImplementedError("nextafter of float16/bfloat16 steps by that type's spacing: "
                                  "runs through the eager kernel")
    return _float_binary("nextafter")(a, b)


def _comparison(name: str):
    def lower(a, b):
        compute = opmath_dtype(result_type(a, b))
        return make_pointwise(getattr(ops, name), a, b, dtype=torch.bool,
                              compute_dtype=compute, result_dtype=torch.bool)
    return lower


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    register_lowering(getattr(aten, _name))(_comparison(_name))


def _logical(name: str):
    def lower(a, b):
        return make_pointwise(getattr(ops, name), a, b, dtype=torch.bool,
                              compute_dtype=torch.bool, result_dtype=torch.bool)
    return lower


for _name in ("logical_and", "logical_or", "logical_xor"):
    register_lowering(getattr(aten, _name))(_logical(_name))


def _bitwise(name: str):
    def lower(a, b):
        dtype = result_type(a, b)
        if dtype == torch.bool:
            logical = {"bitwise_and": ops.logical_and, "bitwise_or": ops.logical_or,
                       "bitwise_xor": ops.logical_xor}[name]
            return make_pointwise(logical, a, b, result_dtype=torch.bool)
        return make_pointwise(getattr(ops, name), a, b)
    return lower


for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    register_lowering(getattr(aten, _name))(_bitwise(_name))


@register_lowering(aten.bitwise_left_shift, aten.__lshift__)
def left_shift(a, b):
    return make_pointwise(ops.left_shift, a, b)


@register_lowering(aten.bitwise_right_shift, aten.__rshift__)
def right_shift(a, b):
    return make_pointwise(ops.right_shift, a, b)


def _scaled(b, alpha):
    if alpha is None or alpha == 1:
        return b
    if is_tensor(b):
        return make_pointwise(ops.mul, b, alpha)
    return b * alpha


# Device types whose eager kernels read a scalar operand of a half-type op unrounded (graph
# fuzzer class 34, measured on CPUs and an H100): mul, div, floor_divide everywhere; add and
# sub on CUDA (its kernels take CPU scalars as op-math values).
SCALAR_PATHS = ("cpu", "cuda")
CUDA_SCALAR_PATHS = ("cuda",)


def _add_scaled(a, b, alpha):
    """a + alpha * b as eager computes it: one fused multiply-add in the op-math type for
    floating results (ATen's CPU kernel is `fmadd(b, alpha, a)`; CUDA's `a + alpha * b` is
    contracted by nvcc), else a product and a sum (exact for integers)."""
    compute = opmath_dtype(result_type(a, b))
    if compute.is_floating_point:
        return make_pointwise(lambda x, y: ops.fma(y, ops.constant(alpha, compute), x), a, b,
                              unrounded_on=CUDA_SCALAR_PATHS)
    return make_pointwise(lambda x, y: ops.add(x, ops.mul(y, ops.constant(alpha, compute))),
                          a, b)


@register_lowering(aten.add)
def add(a, b, alpha=None):
    if alpha is not None and alpha != 1:
        return _add_scaled(a, b, alpha)
    return make_pointwise(ops.add, a, _scaled(b, alpha), unrounded_on=CUDA_SCALAR_PATHS)


@register_lowering(aten.sub)
def sub(a, b, alpha=None):
    if alpha is not None and alpha != 1 and result_type(a, b) != torch.bool:
        return _add_scaled(a, b, -alpha)
    if result_type(a, b) == torch.bool:
        raise NotImplementedError("subtraction of bool tensors")
    return make_pointwise(ops.sub, a, _scaled(b, alpha), unrounded_on=CUDA_SCALAR_PATHS)


def _times_value(tensor, value, compute):
    return tensor if value == 1 else ops.mul(ops.constant(value, compute), tensor)


@register_lowering(aten.addcmul)
def addcmul(self, tensor1, tensor2, *, value=1):
    """self + value * tensor1 * tensor2 as eager's kernel rounds it: on CPU fma(value *
    tensor1, tensor2, self) for floating types (the compiler contracts ATen's vector
    expression), on CUDA fma(value, tensor1 * tensor2, self), and fma(tensor1, tensor2, self)
    where value is 1 (ATen's `pointwise_op_impl` special-cases it: an optimizer's
    `p.addcmul_(g, lr)` differed from eager in the last bit on an H200,
    benchmarks/experiments/results/h200-optimizer-rounding-*.txt)."""
    compute = opmath_dtype(result_type(self, tensor1, tensor2))
    if not compute.is_floating_point:
        value = int(value)   # eager truncates a float value for integer tensors
        return make_pointwise(lambda s, a, b: ops.add(s, ops.mul(_times_value(a, value, compute),
                                                                 b)), self, tensor1, tensor2)
    if _on_cuda(self, tensor1, tensor2) and value == 1:
        return make_pointwise(lambda s, a, b: ops.fma(a, b, s), self, tensor1, tensor2)
    if _on_cuda(self, tensor1, tensor2):   # CUDA's kernel: fma(value, b * c, a)
        return make_pointwise(
            lambda s, a, b: ops.fma(ops.constant(value, compute), ops.mul(a, b), s),
            self, tensor1, tensor2)
    return make_pointwise(lambda s, a, b: ops.fma(_times_value(a, value, compute), b, s),
                          self, tensor1, tensor2)


def _on_cuda(*values) -> bool:
    return any(is_tensor(value) and value.get_device().type == "cuda" for value in values)


@register_lowering(aten.addcdiv)
def addcdiv(self, tensor1, tensor2, *, value=1):
    """As eager's kernel rounds it: on CPU self + (value * tensor1) / tensor2 (not value *
    (tensor1 / tensor2), which rounds differently), on CUDA fma(value, tensor1 / tensor2,
    self)."""
    compute = opmath_dtype(result_type(self, tensor1, tensor2))
    if _on_cuda(self, tensor1, tensor2):   # CUDA's kernel: a + value * (b / c), contracted
        return make_pointwise(
            lambda s, a, b: ops.fma(ops.constant(value, compute), ops.truediv(a, b), s),
            self, tensor1, tensor2)
    return make_pointwise(
        lambda s, a, b: ops.add(s, ops.truediv(_times_value(a, value, compute), b)),
        self, tensor1, tensor2)


@register_lowering(aten.lerp)
def lerp(start, end, weight):
    """Eager's lerp: fma(weight, end - start, start) for |weight| < 0.5, else
    fma(weight - 1, end - start, end), which keeps both ends exact. The weight takes part
    in type promotion: integer ends with a 0-d float weight give a float result (eager's
    only mixed case; the graph fuzzer found it truncated to the ends' integer type)."""
    dtype = result_type(start, end, weight)
    compute = opmath_dtype(dtype)

    def body(s, e, w):
        difference = ops.sub(e, s)
        near_start = ops.fma(w, difference, s)
        near_end = ops.fma(ops.sub(w, ops.constant(1, compute)), difference, e)
        return ops.where(ops.lt(ops.abs(w), ops.constant(0.5, compute)), near_start, near_end)
    return make_pointwise(body, start, end, weight, dtype=dtype)


@register_lowering(aten.rsub)
def rsub(a, b, alpha=None):
    return sub(b, a, alpha)


@register_lowering(aten.mul)
def mul(a, b):
    if result_type(a, b) == torch.bool:
        return make_pointwise(ops.logical_and, a, b, result_dtype=torch.bool)
    return make_pointwise(ops.mul, a, b, unrounded_on=SCALAR_PATHS)


@register_lowering(aten.div, aten.true_divide)
def div(a, b, rounding_mode=None):
    promoted = result_type(a, b)
    if rounding_mode is None:
        dtype = _float_type(a, b)
        compute = opmath_dtype(dtype)
        if _on_cuda(a) and isinstance(b, (int, float)) and b != 0 and is_tensor(a):
            # eager's CUDA kernel multiplies by the scalar's reciprocal, taken in float64 and
            # rounded to the op-math type (measured on the H100: 0 of 65,536 differ; a float32
            # reciprocal differs in 74% for b = 0.001, a true division in 59%)
            reciprocal = float(torch.tensor(1 / b, dtype=torch.float64).to(compute))
            return make_pointwise(lambda x: ops.mul(x, ops.constant(reciprocal, compute)), a,
                                  dtype=dtype, compute_dtype=compute)
        return make_pointwise(ops.truediv, a, b, dtype=dtype, compute_dtype=compute,
                              unrounded_on=SCALAR_PATHS)
    if promoted.is_floating_point:
        if rounding_mode == "trunc":
            # eager rounds, then truncates; its kernels' scalar path (a Python number, or on
            # CPUs a 0-d divisor) truncates the float32 quotient of the unrounded scalar
            device = torch.device("cuda" if _on_cuda(a, b) else "cpu")
            scalar_path = is_scalar(b, device)

            def truncated(x, y):
                quotient = ops.truediv(x, y)
                if promoted in (torch.float16, torch.bfloat16) and not scalar_path:
                    quotient = ops.to_dtype(quotient, promoted)
                return ops.trunc(quotient)
            return make_pointwise(truncated, a, b, unrounded_on=SCALAR_PATHS)
        return make_pointwise(ops.floordiv, a, b, unrounded_on=SCALAR_PATHS)
    operation = ops.truncdiv if rounding_mode == "trunc" else ops.floordiv
    return make_pointwise(operation, a, b)


@register_lowering(aten.floor_divide)
def floor_divide(a, b):
    return div(a, b, "floor")


@register_lowering(aten.remainder)
def remainder(a, b):
    return make_pointwise(ops.remainder, a, b)


@register_lowering(aten.fmod)
def fmod(a, b):
    return make_pointwise(ops.fmod, a, b)


@register_lowering(aten.pow)
def power(base, exponent):
    dtype = result_type(base, exponent)
    compute = opmath_dtype(dtype)

    def of_base(function):
        # the exponent promotes too: bool ** 2 is int64, int ** 2.0 is float32 (fuzzer)
        return make_pointwise(function, base, dtype=dtype, compute_dtype=compute)
    if not is_tensor(exponent) and dtype.is_floating_point:
        if exponent == 2:
            return of_base(lambda x: ops.mul(x, x))
        if exponent == 1:
            return cast(base, dtype)
        if exponent == 0.5 and (dtype != torch.float16 or base.get_device().type == "cuda"):
            return of_base(ops.sqrt)   # eager's CPU float16 kernel calls pow
        if exponent == -1:
            return of_base(ops.reciprocal)
        # Eager's kernels multiply too (GELU's tanh form cubes); for bfloat16 they round each
        # product to the type (float16 on CPUs rounds once), and so does this: bit for bit
        # eager's. A `pow` call instead cost GPT-2's GELU kernel on an H100 three times a
        # streaming kernel's time.
        if exponent == 3 and dtype == torch.bfloat16:
            return of_base(lambda x: ops.mul(ops.to_dtype(ops.mul(x, x), dtype), x))
        if exponent == 3:
            return of_base(lambda x: ops.mul(ops.mul(x, x), x))
        if exponent == -2 and dtype != torch.bfloat16:
            return of_base(lambda x: ops.reciprocal(ops.mul(x, x)))
    if not is_tensor(exponent) and not dtype.is_floating_point and exponent == 2:
        return of_base(lambda x: ops.mul(x, x))
    return make_pointwise(ops.pow, base, exponent, dtype=dtype, compute_dtype=compute)


@register_lowering(aten.where)
def where(condition, a, b):
    dtype = result_type(a, b)
    compute = opmath_dtype(dtype)
    tensors = [value for value in (condition, a, b) if is_tensor(value)]
    size = broadcast_shapes(*(value.get_size() for value in tensors))
    condition_load = value_loader(condition, size, torch.bool)
    a_load, b_load = value_loader(a, size, compute), value_loader(b, size, compute)
    cast_back = compute != dtype

    def inner_fn(index):
        result = ops.where(condition_load(index), a_load(index), b_load(index))
        return ops.to_dtype(result, dtype) if cast_back else result
    return TensorBox.create(Pointwise(tensors[0].get_device(), dtype, inner_fn, size))


@register_lowering(aten.clamp, aten.clip)
def clamp(x, min=None, max=None):
    dtype = result_type(x, min, max)
    compute = opmath_dtype(dtype)

    def body(value, *bounds):
        bounds = list(bounds)
        if min is not None:
            value = ops.maximum(value, bounds.pop(0))   # NaN in value or bound propagates
        if max is not None:
            value = ops.minimum(value, bounds.pop(0))
        return value
    operands = [bound for bound in (min, max) if bound is not None]
    return make_pointwise(body, x, *operands, dtype=dtype, compute_dtype=compute)


@register_lowering(aten.clamp_min)
def clamp_min(x, min):
    return clamp(x, min=min)


@register_lowering(aten.clamp_max)
def clamp_max(x, max):
    return clamp(x, max=max)


@register_lowering(aten._to_copy, aten.clone, aten.lift_fresh_copy, prims.convert_element_type)
def to_copy(x, dtype=None, device=None, **_ignored):
    """A copy (cast) on the value's own device; a copy to another device is a transfer, which
    runs through ATen (a loop body would leave the value where it is)."""
    if device is not None and torch.device(device).type != x.get_device().type:
        raise NotImplementedError("a copy to another device")
    if isinstance(dtype, torch.dtype) and dtype != x.get_dtype():
        return cast(x, dtype)
    return make_pointwise(lambda value: value, x, dtype=x.get_dtype(),
                          compute_dtype=opmath_dtype(x.get_dtype()))


@register_lowering(aten.copy)
def copy(destination, source, non_blocking=False):
    size = destination.get_size()
    dtype = destination.get_dtype()
    loader = value_loader(source, size, opmath_dtype(dtype))

    def inner_fn(index):
        return ops.to_dtype(loader(index), dtype)
    return TensorBox.create(Pointwise(destination.get_device(), dtype, inner_fn, size))


@register_lowering(aten.alias, aten.detach, aten.lift_fresh)
def identity(x):
    return x


@register_lowering(aten.full)
def full(size, fill_value, *, dtype=None, device=None, **_ignored):
    dtype = dtype or result_type(fill_value)
    if isinstance(fill_value, sympy.Expr) and not fill_value.is_number:    # a size's value
        loader = value_loader(fill_value, size, dtype)
        return TensorBox.create(Pointwise(device or torch.device("cpu"), dtype, loader,
                                          [to_expr(extent) for extent in size]))
    return constant_box(fill_value, dtype, size, device or torch.device("cpu"))


@register_lowering(aten.scalar_tensor)
def scalar_tensor(value, *, dtype=None, device=None, **_ignored):
    return full([], value, dtype=dtype or torch.get_default_dtype(), device=device)


@register_lowering(aten.full_like)
def full_like(x, fill_value, *, dtype=None, device=None, **_ignored):
    return full(x.get_size(), fill_value, dtype=dtype or x.get_dtype(),
                device=device or x.get_device())


def _like(x, dtype, device):
    return dtype or x.get_dtype(), device or x.get_device()


@register_lowering(aten.empty, aten.zeros)
def empty(size, *, dtype=None, device=None, **_ignored):
    """Uninitialised memory in eager; zeros here (no reader may depend on the contents)."""
    return full(size, 0, dtype=dtype or torch.get_default_dtype(), device=device)


@register_lowering(aten.empty_strided)
def empty_strided(size, stride, *, dtype=None, device=None, **_ignored):
    return empty(size, dtype=dtype, device=device)


@register_lowering(aten.empty_like, aten.zeros_like)
def empty_like(x, *, dtype=None, device=None, **_ignored):
    dtype, device = _like(x, dtype, device)
    return full(x.get_size(), 0, dtype=dtype, device=device)


@register_lowering(aten.new_empty, aten.new_zeros)
def new_empty(x, size, *, dtype=None, device=None, **_ignored):
    dtype, device = _like(x, dtype, device)
    return full(size, 0, dtype=dtype, device=device)


@register_lowering(aten.new_empty_strided)
def new_empty_strided(x, size, stride, *, dtype=None, device=None, **_ignored):
    return new_empty(x, size, dtype=dtype, device=device)
