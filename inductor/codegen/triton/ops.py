"""The Triton `ops` handler: loop-body operations become Triton statements.

Input: `ops.*` calls made by loop bodies (through `inner_fn`) inside a scope the kernel
printer opens. Output: lines `tmp3 = tl.exp(tmp2)` appended to that scope, with common
subexpressions shared. Values carry their compute dtype: float16 and bfloat16 are loaded as
float32 and rounded only where the graph casts to them or stores them, as in eager.

The scope (a `TritonKernel`) provides `add_line`, `pointer`, `dtype_of`, `forwarded`,
`index_text`, `mask_for` (the lane mask an index needs: None where its axes divide evenly
into blocks), `axes_of` (the axes an index spans), `masks` (the masks of some axes),
`lane_mask` (every lane of the scope) and `check` (report a run-time error code for the lanes
of a condition). Operators and library calls of the table of primitives print through
`codegen/handler.py`; this module holds Triton's own cases.
"""
from __future__ import annotations

from typing import Optional

import torch

from inductor.codegen.bounds import is_empty
from inductor.codegen.triton.expressions import compute_dtype, literal, triton_type
from inductor.codegen.handler import KernelOpsHandler, Value
from inductor.ir.primitives import BY_NAME
from inductor.ir.symbols import signed_symbol

ERROR_ZERO_DIVISION = 1
ERROR_INDEX = 2
SMALL_INTEGERS = (torch.int8, torch.uint8, torch.int16)
BITS = {torch.int8: 8, torch.uint8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64,
        torch.bool: 1}


class TritonValue(Value):
    """A Triton expression (a temporary's name, or an inline constant: `bare`, a Python
    literal, not a tensor until wrapped) and its dtype."""

    __slots__ = ()


class TritonOpsHandler(KernelOpsHandler):
    """Emits Triton for one scope of a kernel (see the module docstring)."""

    language, column, conjunction, value_type = "Triton", "triton", "&", TritonValue

    def __init__(self, scope, prefix: str = "tmp"):
        super().__init__(prefix)
        self.scope = scope
        self.rounded: dict = {}   # name of a value rounded to a half type -> (dtype, source)
        self.zero_filled: dict = {}   # name of a masked load's value -> its mask (lanes 0)

    # -- emission --------------------------------------------------------------------------
    def declare(self, name: str, text: str, dtype: torch.dtype) -> None:
        self.scope.add_line(f"{name} = {text}")
        self.scope.define(name, text)

    def tensor(self, value: TritonValue) -> str:
        """`value` as text that is a Triton tensor (bare literals wrapped in `tl.full`)."""
        if value.bare:
            return f"tl.full([], {value.name}, {triton_type(value.dtype)})"
        return value.name

    # -- memory ----------------------------------------------------------------------------
    def load(self, name, index):
        known = self.scope.forwarded(name, index)
        if known is not None:
            return known
        dtype = self.scope.dtype_of(name)
        if is_empty(name, self.scope.extents):      # no memory to read (bounds.py)
            self.scope.add_line(f"# {name} has no elements: read as 0")
            return self.constant(0, dtype)
        mask = self._mask(index)
        offset = self.scope.index_text(index)
        self.scope.assert_in_bounds(name, offset, mask, "load")
        arguments = self.address(name, offset, mask)
        if mask:
            arguments += f", {mask}, other=0"
        text = f"tl.load({arguments})"
        if dtype in (torch.float16, torch.bfloat16):
            text += ".to(tl.float32)"
        if (text, compute_dtype(dtype)) not in self.cse:
            self.scope.synchronise_before_load(name)
        value = self.emit(text, compute_dtype(dtype))
        if mask:
            self.zero_filled[value.name] = mask
        return value

    def _mask(self, index) -> Optional[str]:
        mask = self.scope.mask_for(index)
        if self.predicate is not None:
            mask = f"{mask} & {self.predicate}" if mask else self.predicate
        return mask

    def store_text(self, name: str, index, value: TritonValue) -> str:
        """The statement writing `value` into buffer `name` at `index`."""
        if is_empty(name, self.scope.extents):      # no memory to write (bounds.py)
            return f"pass  # {name} has no elements: nothing stored"
        dtype = self.scope.dtype_of(name)
        text = self.tensor(value)
        known = self.rounded.get(value.name)
        if known is not None and known[0] == dtype and not self.scope.interpret:
            text = known[1]     # the store's own conversion rounds: skip the rounding step
        elif known is None and self.scope.interpret and dtype in (torch.bfloat16, torch.float16) \
                and value.dtype == torch.float32:
            # a value kept in float32 (`config.eager_rounding` off): the interpreter's
            # conversion truncates, so round to nearest even first, as a GPU's store does
            text = self.tensor(self.to_dtype(value, dtype))
        if dtype != value.dtype:
            text = f"{text}.to({triton_type(dtype)})"
        offset = self.scope.index_text(index)
        axes = self.scope.axes_of(index)
        if not axes:
            # One element for every lane: spread the pointer over the X lanes (values may be
            # blocks of them) and let the first lane's mask decide.
            offset, axes = f"{offset} + xindex * 0", {"x"}
        mask = self.scope.masks(*axes)
        masking = f", {mask}" if mask else ""
        self.scope.assert_in_bounds(name, offset, mask, "store")
        return f"tl.store({self.address(name, offset, mask, text)}, {text}{masking})"

    def address(self, name: str, offset: str, mask: Optional[str], value: str = "") -> str:
        """The address of buffer `name` at `offset`, for an access under `mask` (of `value`).
        Where the mask or the stored value varies over lanes the address does not (a
        constant or once-read index under a block mask, a scatter's one target), Triton needs
        the pointer to be a block of their shape, not a scalar or a narrower block."""
        pointer = f"{self.scope.pointer(name)} + ({offset})"
        needed = self.scope.text_axes(f"{mask or ''} {value}")
        spanned = self.scope.text_axes(offset)
        if needed <= spanned:
            return pointer
        return self.scope.lanes(pointer, needed | spanned)

    def indirect_indexing(self, value, size, check=True):
        name = f"{self.prefix}_index{self.indirect_count}"
        self.indirect_count += 1
        bound = self.scope.index_text(size)
        wrapped = f"tl.where({value.name} < 0, {value.name} + {bound}, {value.name})"
        self.scope.add_line(f"{name} = {wrapped}")
        self.scope.define(name, wrapped)
        if check:
            outside = f"({name} < 0) | ({name} >= {bound})"
            self.scope.check(outside, ERROR_INDEX, self.predicate)
            self.scope.add_line(f"{name} = tl.where({outside}, 0, {name})")
        return signed_symbol(name)

    def masked(self, mask, body, other):
        mask_name = self.tensor(mask)
        result = self.under_mask(mask_name, body)
        if isinstance(other, TritonValue):
            other_text = other.name
        else:
            other_text = literal(other, result.dtype)[0]
        return self.emit(f"tl.where({mask_name}, {result.name}, {other_text})", result.dtype)

    # -- values ----------------------------------------------------------------------------
    def constant(self, value, dtype):
        text, bare = literal(value, dtype)
        return TritonValue(text, compute_dtype(dtype), bare)

    def index_expr(self, expr, dtype):
        dtype = compute_dtype(dtype)
        text = self.scope.index_text(expr)
        # a constant, or an index the kernel's extents make one (a size-1 or size-0 loop's
        # symbol printed as 0: `(0).to(...)` is no Triton tensor; graph fuzzer seed 5275)
        if not any(True for _ in getattr(expr, "free_symbols", ())) or \
                text.lstrip("-").isdigit():
            return TritonValue(f"tl.full([], {text}, {triton_type(dtype)})", dtype)
        return self.emit(f"({text}).to({triton_type(dtype)})", dtype)

    def to_dtype(self, value, dtype, src_dtype=None):
        target = compute_dtype(dtype)
        if dtype in (torch.bfloat16, torch.float16):
            source = value if value.dtype == torch.float32 else \
                self.to_dtype(value, torch.float32)
            helper = "jit_round_fp16" if dtype == torch.float16 else \
                "jit_round_bf16" if self.scope.interpret else "jit_round_bf16_native"
            result = self.emit(f"{helper}({self.tensor(source)})", torch.float32)
            self.rounded[result.name] = (dtype, self.tensor(source))
            return result
        if value.dtype == target:
            return value
        if target == torch.bool:
            return self.emit(f"{self.tensor(value)} != 0", torch.bool)
        if value.dtype.is_floating_point and target in SMALL_INTEGERS:
            # Out-of-range floats wrap like eager's (through int32).
            return self.emit(f"{self.tensor(value)}.to(tl.int32).to({triton_type(target)})",
                             target)
        return self.emit(f"{self.tensor(value)}.to({triton_type(target)})", target)

    def bitcast(self, value, dtype):
        return self.emit(f"{self.tensor(value)}.to({triton_type(dtype)}, bitcast=True)", dtype)

    def where(self, condition, a, b):
        return self.emit(f"tl.where({condition.name}, {a.name}, {b.name})", a.dtype)

    def random(self, seed, offset, distribution):
        """`distribution` ("rand" or "randn") float32 values at integer `offset`s."""
        helper = "jit_rand" if distribution == "rand" else "jit_randn"
        return self.emit(f"{helper}({self.tensor(seed)}, {self.tensor(offset)})", torch.float32)

    # -- the table's operators and calls ---------------------------------------------------
    def infix(self, row, a, b):
        return self._binary(row.operator, a, b, row.result_dtype(a.dtype))

    def _binary(self, operator: str, a, b, dtype: Optional[torch.dtype] = None):
        left = self.tensor(a) if a.bare and b.bare else a.name
        return self.emit(f"{left} {operator} {b.name}", dtype or a.dtype)

    def call(self, row, function, values):
        arguments = ", ".join(self.tensor(value) for value in values)
        return self.emit(f"{function}({arguments})", row.result_dtype(values[0].dtype))

    # -- arithmetic of Triton's own --------------------------------------------------------
    def add(self, a, b):
        if a.dtype == torch.bool:   # an int1 sum wraps on GPUs: True + True was False
            return self._binary("|", a, b)
        return self.infix(BY_NAME["add"], a, b)

    def truediv(self, a, b):
        reciprocal = getattr(self.scope, "reciprocals", {}).get(b.name)
        if reciprocal is not None and a.dtype == torch.float32 and not a.bare:
            # Dividing by a per-row value inside a loop: multiply by its reciprocal, computed
            # once per row by the kernel (see TritonKernel._result).
            return self.emit(f"{a.name} * {reciprocal}", a.dtype)
        if a.dtype in (torch.float32, torch.float64):
            return self.emit(f"jit_div({self.tensor(a)}, {self.tensor(b)})", a.dtype)
        return self._binary("/", a, b)

    def _integer_division(self, helper: str, a, b):
        self.scope.check(f"{self.tensor(b)} == 0", ERROR_ZERO_DIVISION, self.predicate)
        return self.emit(f"{helper}({self.tensor(a)}, {self.tensor(b)})", a.dtype)

    def floordiv(self, a, b):
        if a.dtype.is_floating_point:
            return self.emit(f"jit_floordiv_float({self.tensor(a)}, {self.tensor(b)})",
                             a.dtype)
        return self._integer_division("jit_floordiv_int", a, b)

    def truncdiv(self, a, b):
        if a.dtype.is_floating_point:
            return self.emit(f"libdevice.trunc(jit_div({self.tensor(a)}, {self.tensor(b)}))",
                             a.dtype)
        return self._integer_division("jit_truncdiv_int", a, b)

    def remainder(self, a, b):
        if a.dtype.is_floating_point:
            return self.emit(f"jit_remainder_float({self.tensor(a)}, {self.tensor(b)})",
                             a.dtype)
        return self._integer_division("jit_remainder_int", a, b)

    def fmod(self, a, b):
        if a.dtype.is_floating_point:
            return self.emit(f"libdevice.fmod({self.tensor(a)}, {self.tensor(b)})", a.dtype)
        return self._integer_division("jit_fmod_int", a, b)

    def pow(self, a, b):
        if a.dtype.is_floating_point:
            return self.emit(f"libdevice.pow({self.tensor(a)}, {self.tensor(b)})", a.dtype)
        return self.emit(f"jit_ipow({self.tensor(a)}, {self.tensor(b)})", a.dtype)

    def maximum(self, a, b):
        if a.dtype == torch.bool:
            return self.emit(f"{self.tensor(a)} | {self.tensor(b)}", a.dtype)
        if a.dtype.is_floating_point:
            return self.emit(f"jit_maximum({self.tensor(a)}, {self.tensor(b)})", a.dtype)
        return self.emit(f"tl.maximum({self.tensor(a)}, {self.tensor(b)})", a.dtype)

    def minimum(self, a, b):
        if a.dtype == torch.bool:
            return self.emit(f"{self.tensor(a)} & {self.tensor(b)}", a.dtype)
        if a.dtype.is_floating_point:
            return self.emit(f"jit_minimum({self.tensor(a)}, {self.tensor(b)})", a.dtype)
        return self.emit(f"tl.minimum({self.tensor(a)}, {self.tensor(b)})", a.dtype)

    def _truth(self, value) -> str:
        return self.tensor(value) if value.dtype == torch.bool else f"({self.tensor(value)} != 0)"

    def logical_and(self, a, b):
        return self.emit(f"{self._truth(a)} & {self._truth(b)}", torch.bool)

    def logical_or(self, a, b):
        return self.emit(f"{self._truth(a)} | {self._truth(b)}", torch.bool)

    def logical_xor(self, a, b):
        # `!=` of truth values: the interpreter has no `^` of a bool block and a bool scalar
        return self.emit(f"{self._truth(a)} != {self._truth(b)}", torch.bool)

    def bitwise_xor(self, a, b):
        if a.dtype == torch.bool:
            return self.logical_xor(a, b)
        return self.infix(BY_NAME["bitwise_xor"], a, b)

    def left_shift(self, a, b):
        return self.emit(f"jit_shift_left({self.tensor(a)}, {self.tensor(b)}, {BITS[a.dtype]})",
                         a.dtype)

    def right_shift(self, a, b):
        return self.emit(f"jit_shift_right({self.tensor(a)}, {self.tensor(b)}, "
                         f"{BITS[a.dtype]})", a.dtype)

    def special(self, name, values):
        if len(values) != 1:
            return None
        special = _special_unary(name, self.tensor(values[0]), values[0].dtype)
        return None if special is None else self.emit(*special)


def _one(dtype: torch.dtype) -> str:
    return f"tl.full([], 1.0, {triton_type(dtype)})"


def _special_unary(name: str, text: str, dtype: torch.dtype):
    """(Triton text, result dtype) of the one-operand primitives without a library function
    in the table, or None."""
    integer = "tl.int64" if dtype == torch.float64 else "tl.int32"
    table = {
        "neg": (f"-{text}", dtype),
        "sqrt": (f"tl.sqrt_rn({text})" if dtype == torch.float32 else f"tl.sqrt({text})",
                 dtype),
        "reciprocal": (f"jit_div({_one(dtype)}, {text})", dtype),
        "sigmoid": (f"jit_div({_one(dtype)}, 1.0 + tl.exp(-{text}))", dtype),
        "sign": (f"({text} > 0).to({triton_type(dtype)}) - ({text} < 0).to("
                 f"{triton_type(dtype)})", dtype),
        "signbit": (f"{text}.to({integer}, bitcast=True) < 0", torch.bool),
        "isnan": (f"{text} != {text}", torch.bool),
        "isinf": (f'tl.abs({text}) == float("inf")', torch.bool),
        "isfinite": (f'tl.abs({text}) < float("inf")', torch.bool),
        "logical_not": (f"{text} == 0", torch.bool),
        # `~` is `^ -1`, which the interpreter cannot make for an unsigned type
        "bitwise_not": (f"{text} ^ tl.full([], 255, tl.uint8)" if dtype == torch.uint8
                        else f"~{text}", dtype),
        "square": (f"{text} * {text}", dtype),
    }
    if name == "sign" and dtype == torch.bool:
        return text, dtype
    if name in ("signbit",) and not dtype.is_floating_point:
        return f"{text} < 0", torch.bool
    if name in ("isnan", "isinf") and not dtype.is_floating_point:
        return f"{text} != {text}", torch.bool
    if name == "isfinite" and not dtype.is_floating_point:
        return f"{text} == {text}", torch.bool
    if name == "bitwise_not" and dtype == torch.bool:
        return f"{text} == 0", torch.bool
    return table.get(name)
