"""Building blocks of lowerings: type promotion, broadcasting and pointwise loop bodies.

Input: lowered operands (`TensorBox`es and Python scalars). Output: `Pointwise` loop bodies
in `TensorBox`es, with torch's type promotion (categories, zero-dim tensors and Python
scalars rank below dimensioned tensors) and computation in the op-math type (float32 for
float16 and bfloat16 operands, as eager's CPU kernels do).
"""
from __future__ import annotations

import functools
from typing import Callable, Optional, Sequence

import sympy
import torch

from inductor.config import config
from inductor.ir.nodes import Pointwise, TensorBox
from inductor.ir.ops import OpsHandler, ops, use_handler
from inductor.ir.primitives import BY_NAME
from inductor.ir.symbols import index_symbol, size_hint, to_expr
from inductor.lower.size_floats import SizeFloat

HALF_TYPES = (torch.float16, torch.bfloat16)


def is_tensor(value) -> bool:
    return isinstance(value, TensorBox)


def opmath_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic on `dtype` values is carried out in."""
    return torch.float32 if dtype in HALF_TYPES else dtype


@functools.lru_cache(maxsize=4096)
def _result_type_of(keys: tuple) -> torch.dtype:
    dummies = []
    for kind, value in keys:
        if kind == "tensor":
            dummies.append(torch.empty((1,), dtype=value, device="meta"))
        elif kind == "zero_dim":
            dummies.append(torch.empty((), dtype=value, device="meta"))
        else:
            dummies.append({"bool": True, "int": 1, "float": 1.0, "complex": 1j}[value])
    result = dummies[0]
    for other in dummies[1:]:
        dtype = torch.result_type(result, other)
        dims = max(getattr(result, "dim", lambda: -1)(), getattr(other, "dim", lambda: -1)())
        shape = (1,) if dims > 0 else ()
        result = torch.empty(shape, dtype=dtype, device="meta") if dims >= 0 else \
            _scalar_of(dtype)
    return result.dtype if isinstance(result, torch.Tensor) else _dtype_of_scalar(result)


def _scalar_of(dtype: torch.dtype):
    if dtype == torch.bool:
        return True
    if dtype.is_complex:
        return 1j
    return 1.0 if dtype.is_floating_point else 1


def _dtype_of_scalar(value) -> torch.dtype:
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, int):
        return torch.int64
    if isinstance(value, complex):
        return torch.complex64
    return torch.get_default_dtype()


def _key(value) -> tuple:
    if is_tensor(value):
        kind = "zero_dim" if len(value.get_size()) == 0 else "tensor"
        return (kind, value.get_dtype())
    # Names, not sample values: 1 == 1.0 == True would collide in the cache key.
    if isinstance(value, bool):
        return ("scalar", "bool")
    if isinstance(value, int) or (isinstance(value, sympy.Expr) and value.is_integer):
        return ("scalar", "int")    # (a symbolic size is an int)
    if isinstance(value, (float, SizeFloat)):
        return ("scalar", "float")
    if isinstance(value, complex):
        return ("scalar", "complex")
    raise TypeError(f"cannot promote a {type(value).__name__}")


def result_type(*values) -> torch.dtype:
    """torch's promoted dtype of tensors and Python scalars (None values are skipped)."""
    keys = tuple(_key(value) for value in values if value is not None)
    return _result_type_of(keys)


def broadcast_shapes(*sizes: Sequence) -> list:
    """The broadcast of several sizes (sympy expressions), right-aligned."""
    rank = max((len(size) for size in sizes), default=0)
    result = [sympy.Integer(1)] * rank
    for size in sizes:
        for position, extent in enumerate(size, start=rank - len(size)):
            extent = to_expr(extent)
            if extent != 1:
                result[position] = extent
    return result


def broadcast_loader(loader: Callable, size: Sequence, target: Sequence) -> Callable:
    """A loader over `target` reading `loader` (over `size`) with broadcasting."""
    size = [to_expr(extent) for extent in size]
    offset = len(target) - len(size)
    if offset == 0 and all(a == to_expr(b) for a, b in zip(size, target)):
        return loader

    def load(index):
        picked = [sympy.Integer(0) if extent == 1 else index[offset + position]
                  for position, extent in enumerate(size)]
        return loader(picked)
    return load


class _CostCounter(OpsHandler):
    def __init__(self):
        self.loads = 0
        self.operations = 0
        self.transcendentals = 0
        self.gathers = 0

    def load(self, name, index):
        self.loads += 1
        return "value"

    def indirect_indexing(self, value, size, check=True):
        self.operations += 1
        self.gathers += 1
        return index_symbol("t", 0)

    def masked(self, mask, body, other):
        self.operations += 1
        return body()

    def default(self, name, *args, **kwargs):
        self.operations += 1
        primitive = BY_NAME.get(name.removeprefix("vml_"))   # ops.vml_cos: VML's rounding
        if primitive is not None and primitive.vml is not None:
            self.transcendentals += 1
        return "value"


def body_cost(loops: Pointwise) -> tuple[int, int]:
    """(loads, operations) of one evaluation of a pointwise body."""
    counter = _counted(loops)
    return counter.loads, counter.operations


def body_transcendentals(loops: Pointwise) -> int:
    """How many transcendental functions (exp, cos, tanh, ...: the primitives with a VML
    spelling) one evaluation of a pointwise body calls."""
    return _counted(loops).transcendentals


def _counted(loops: Pointwise) -> _CostCounter:
    counter = _CostCounter()
    index = [index_symbol("i", position) for position in range(len(loops.ranges))]
    with use_handler(counter):
        loops.inner_fn(index)
    return counter


# A computed operand broadcast into a consumer at least this many times larger is realized
# once on CPUs (BatchNorm's per-channel scale would otherwise be recomputed, with a square
# root and a division, for every pixel). Not on GPUs: the memory-bound consumer has the
# arithmetic to spare, while a kernel of its own costs a launch (ResNet-50 on an H100: 53
# more launches, 2.7 -> 7.1 ms per call in the default mode).
BROADCAST_REALIZE_RATIO = 8
# Lower for a body calling a transcendental function (tens of operations per element, and a
# VML call per row where eager rounds through VML): Llama's rotary cos/sin tables, broadcast
# over 4 query and 2 key heads, were recomputed per head in every layer's rotation kernels
# (0.45 ms per layer against 0.2 for torch.compile; docs/performance-notes.md, Llama).
TRANSCENDENTAL_REALIZE_RATIO = 2
# And for a body that gathers (an index load, its range check and a scattered load per
# element, which do not vectorize): Swin's relative position bias, `table[index]` for one
# window, was gathered again for each of the 64 windows inside every attention softmax
# (docs/performance-notes.md, Swin-T).
GATHER_REALIZE_RATIO = 2


def realize_if_broadcast(value, size: Sequence) -> None:
    """Realize `value`'s body when a reader of `size` would recompute it per broadcast
    element (the ratios above; CPUs only)."""
    storage = value.storage()
    if storage is None or storage.is_realized() or not isinstance(storage.data, Pointwise):
        return
    if value.get_device().type == "cuda":
        return
    source = 1
    for extent in value.get_size():
        source *= size_hint(extent)    # a heuristic: symbolic sizes at their example values
    target = 1
    for extent in size:
        target *= size_hint(extent)
    counted = _counted(storage.data)
    if target >= BROADCAST_REALIZE_RATIO * max(source, 1) and counted.operations > 1:
        storage.realize()
    elif target >= TRANSCENDENTAL_REALIZE_RATIO * max(source, 1) and counted.transcendentals:
        storage.realize()
    elif target >= GATHER_REALIZE_RATIO * max(source, 1) and counted.gathers:
        storage.realize()


def value_loader(value, size: Sequence, dtype: torch.dtype,
                 through: Optional[torch.dtype] = None) -> Callable:
    """A loader over `size` yielding `value` (tensor or scalar) converted to `dtype`; with
    `through` (a half type), a value of another dtype is rounded to it first."""
    if is_tensor(value):
        realize_if_broadcast(value, size)
        inner = broadcast_loader(value.make_loader(), value.get_size(), size)
        source = value.get_dtype()
        if through is not None and source != through:
            return lambda index: ops.to_dtype(ops.to_dtype(inner(index), through), dtype)
        if opmath_dtype(source) == dtype or source == dtype:
            return inner
        return lambda index: ops.to_dtype(inner(index), dtype)
    if isinstance(value, sympy.Expr) and not value.is_number:   # a symbolic size
        if through is not None:
            return lambda index: ops.to_dtype(ops.to_dtype(
                ops.index_expr(value, torch.int64), through), dtype)
        return lambda index: ops.to_dtype(ops.index_expr(value, torch.int64), dtype)
    if isinstance(value, SizeFloat):   # a float of sizes, as a constant of its value would be
        if through is not None:
            return lambda index: ops.to_dtype(ops.to_dtype(value.emit(), through,
                                                           torch.float64), dtype, through)
        return lambda index: ops.to_dtype(value.emit(), dtype, torch.float64)
    constant = value
    if through is not None:
        constant = float(torch.tensor(value).to(through))
    return lambda index: ops.constant(constant, dtype)


def is_scalar(value, device: torch.device) -> bool:
    """A Python number, or on CPUs also a 0-d tensor: what eager's kernels treat as a scalar
    (CUDA kernels take CPU scalars; a 0-d CUDA tensor is a tensor like any other)."""
    return not is_tensor(value) or (device.type == "cpu" and len(value.get_size()) == 0)


def _rounding_type(promoted: torch.dtype) -> Optional[torch.dtype]:
    """The half type operands of another dtype are rounded to before the op: eager converts
    every operand to the common dtype (`bf16 + float32 0-d` adds the 0-d value rounded to
    bfloat16: graph fuzzer class 34), except scalars its kernels read unrounded."""
    return promoted if promoted in HALF_TYPES else None


def make_pointwise(function: Callable, *operands, dtype: Optional[torch.dtype] = None,
                   compute_dtype: Optional[torch.dtype] = None,
                   result_dtype: Optional[torch.dtype] = None,
                   unrounded_on: tuple = ()) -> TensorBox:
    """A pointwise op over broadcast operands.

    Operands are loaded and converted to `compute_dtype` (default: the op-math type of the
    promoted dtype), through a promoted half type where theirs differs (as eager converts
    them to the common dtype), except scalars (`is_scalar`) on the device types in
    `unrounded_on`, whose eager kernels read them unrounded (measured: `mul`, `div`,
    `floor_divide` on CPUs and CUDA, `add` and `sub` on CUDA);
    `function(*values)` yields a value of `result_dtype` (default: the compute dtype),
    converted to `dtype` (default: the promoted dtype) when they differ; a half-type result
    stays float32 until stored when `config.eager_rounding` is off.
    """
    promoted = result_type(*operands)
    dtype = dtype or promoted
    compute_dtype = compute_dtype or opmath_dtype(promoted)
    result_dtype = result_dtype or compute_dtype
    tensors = [operand for operand in operands if is_tensor(operand)]
    size = broadcast_shapes(*(tensor.get_size() for tensor in tensors))
    device = tensors[0].get_device() if tensors else torch.device("cpu")
    through = _rounding_type(promoted)
    unrounded = device.type in unrounded_on
    loaders = [value_loader(operand, size, compute_dtype,
                            None if unrounded and is_scalar(operand, device) else through)
               for operand in operands]
    needs_cast = opmath_dtype(result_dtype) != opmath_dtype(dtype) or \
        (dtype in HALF_TYPES and result_dtype != dtype and config.eager_rounding)

    def inner_fn(index):
        result = function(*(loader(index) for loader in loaders))
        return ops.to_dtype(result, dtype) if needs_cast else result
    return TensorBox.create(Pointwise(device, dtype, inner_fn, size))


def constant_box(value, dtype: torch.dtype, size: Sequence, device: torch.device) -> TensorBox:
    """A tensor of `size` filled with `value`."""
    return TensorBox.create(Pointwise(device, dtype, lambda index: ops.constant(value, dtype),
                                      size))


def cast(value: TensorBox, dtype: torch.dtype) -> TensorBox:
    """`value` converted to `dtype` (the same box when it already has that dtype)."""
    if value.get_dtype() == dtype:
        return value
    loader = value.make_loader()
    source = value.get_dtype()

    def inner_fn(index):
        return ops.to_dtype(loader(index), dtype, source)
    return TensorBox.create(Pointwise(value.get_device(), dtype, inner_fn, value.get_size()))
