"""The C++ `ops` handler: loop-body operations become C++ statements.

Input: `ops.*` calls made by loop bodies (through `inner_fn`), inside a scope the kernel
printer opens. Output: lines `const float tmp3 = expf(tmp2);` appended to that scope, with
common subexpressions shared. Values carry their compute dtype: float16 and bfloat16 are
loaded as float and rounded only where the graph casts to them or stores them. Operators
and library calls of the table of primitives print through `codegen/handler.py`; this module
holds C++'s own cases (integer and float paths, masks, conversions, eager's rounding).
"""
from __future__ import annotations

import math
import struct
from typing import Callable, Optional

import torch

from inductor.codegen.bounds import cpp_index, is_empty
from inductor.codegen.cpp.expressions import (compute_dtype, index_text, literal,
                                              storage_type)
from inductor.codegen.cpp.lines import INDEX_ERROR_FLAG, INT64_TO_FLOAT
from inductor.codegen.cpp.segments import Segment, SegmentFacts
from inductor.codegen.handler import KernelOpsHandler, Value
from inductor.ir.primitives import BOOL, BY_NAME, PRIMITIVES
from inductor.ir.symbols import signed_symbol
from inductor.runtime.build import vml_library

SMALL_INTEGERS = (torch.int8, torch.uint8, torch.int16)


class CppValue(Value):
    """A named C++ value and its compute dtype."""

    __slots__ = ()


def cpp_function(function: str, dtype: torch.dtype) -> str:
    """The C++ function of a table spelling for operands of `dtype`: libm's and the
    builtins' float32 variants end in `f`; the prelude's `jit_*` overloads take every type."""
    if dtype == torch.float32 and not function.startswith("jit_"):
        return function + "f"
    return function


def math_declarations() -> str:
    """The prelude's declarations of the libm functions the table's C++ spellings call
    (`JIT_MATH_*` of prelude.h: float and double, `simd` where libmvec's vector variants
    may be used)."""
    words = []
    for row in PRIMITIVES:
        if row.cpp and not row.cpp.startswith(("jit_", "__builtin_")):
            kind = "" if row.cpp_vector else "SCALAR_"
            arity = {1: "UNARY", 2: "BINARY"}[row.arity]
            words.append(f"JIT_MATH_{kind}{arity}({row.cpp})")
    return "\n".join(" ".join(words[start:start + 4]) for start in range(0, len(words), 4))


class CppOpsHandler(KernelOpsHandler):
    """Emits C++ for one scope of a kernel.

    `pointer(name)` gives the C++ pointer variable of a buffer, `dtype_of(name)` its element
    dtype; `forwarded(name, index)` returns a value already computed in registers for that
    element, or None; `index_hook(expr)` prints (and may rewrite) an index expression;
    `extents` (buffer name -> elements it spans) drops accesses to empty buffers and, with
    `check_bounds` (bounds mode), checks each index, reporting `site` (the kernel's name).
    `segment`: the part of the innermost loop's range this scope runs, where position tests
    it decides fold (segments.py).
    """

    language, column, conjunction, value_type = "C++", "cpp", "&&", CppValue

    def __init__(self, lines: list, dtype_of: Callable, forwarded: Callable,
                 index_hook: Callable, prefix: str = "tmp", pointer: Callable = str,
                 reciprocals: Optional[dict] = None, extents: Optional[dict] = None,
                 site: str = "", check_bounds: bool = False, hoist=None,
                 segment: Optional[Segment] = None):
        super().__init__(prefix)
        self.facts = SegmentFacts(segment) if segment is not None else None
        self.hoist = hoist
        self.lines = lines
        self.extents = extents
        self.checked = extents if check_bounds else None
        self.site = site
        self.pointer = pointer
        self.reciprocals = reciprocals or {}
        self.dtype_of = dtype_of
        self.forwarded = forwarded
        self.index_hook = index_hook
        self.bf16_exact: set = set()   # values bf16_round made or loaded (stored as their bits)
        # values loaded from float16 buffers (or chosen among them): stored as their bits by
        # half_bits, a signalling NaN too, as eager's copies keep it
        self.half_exact: set = set()
        # half_round's results: the float each rounds (stored by float_to_half of that float,
        # the same bits, without the round trip through a half: 2x less work per store)
        self.half_rounded: dict = {}

    # -- emission --------------------------------------------------------------------------
    def emit(self, text: str, dtype: torch.dtype):
        if self._hoists() and self.hoist.takes_expression(text, dtype):
            return self.hoist.value(text, dtype, CppValue)
        return super().emit(text, dtype)

    def _hoists(self) -> bool:
        """Whether values invariant in the inner loop nest move before it (hoist.py)."""
        return self.hoist is not None and self.predicate is None

    def declare(self, name: str, text: str, dtype: torch.dtype) -> None:
        self.lines.append(f"const {storage_type(dtype)} {name} = {text};")

    def _narrow(self, text: str, dtype: torch.dtype) -> str:
        if dtype in SMALL_INTEGERS or dtype == torch.bool:
            return f"static_cast<{storage_type(dtype)}>({text})"
        return text

    # -- memory ----------------------------------------------------------------------------
    def load(self, name, index):
        known = self.forwarded(name, index)
        if known is not None:
            return known
        dtype = self.dtype_of(name)
        if is_empty(name, self.extents):
            self.lines.append(f"// {name} has no elements: read as 0")
            return self.constant(0, dtype)
        position = cpp_index(self.index_hook(index), name, self.checked, self.site, "load")
        element = f"{self.pointer(name)}[{position}]"
        if dtype == torch.bfloat16:
            element = f"bf16_to_float({element})"
        elif dtype == torch.float16:
            element = f"half_to_float({element})"
        if self.predicate is not None:
            zero = literal(0, dtype)
            element = f"({self.predicate} ? {element} : {zero})"
        elif self._hoists() and self.hoist.takes_load(name, index):
            return self._loaded(self.hoist.value(element, compute_dtype(dtype), CppValue),
                                dtype)
        return self._loaded(self.emit(element, compute_dtype(dtype)), dtype)

    def _loaded(self, value: CppValue, dtype: torch.dtype) -> CppValue:
        if dtype == torch.float16:
            self.half_exact.add(value.name)
        return self._exact(value, dtype == torch.bfloat16)

    def _exact(self, value: CppValue, exact: bool) -> CppValue:
        """`value`, noted as a bfloat16 value held in a float (stored as its bits: a copy
        keeps a NaN's payload, as eager's does) where `exact`."""
        if exact:
            self.bf16_exact.add(value.name)
        return value

    def _half_exact(self, value: CppValue, sources) -> CppValue:
        """`value`, noted as stored by its bits where it is one of `sources` (values and
        constants) and each value among them is (a constant is never a signalling NaN)."""
        if all(not isinstance(source, CppValue) or source.name in self.half_exact
               for source in sources):
            self.half_exact.add(value.name)
        return value

    def store_text(self, name: str, index, value: CppValue) -> str:
        """The statement writing `value` into buffer `name` at `index`."""
        dtype = self.dtype_of(name)
        text = value.name
        if dtype == torch.bfloat16:
            text = f"bf16_bits({text})" if text in self.bf16_exact else f"float_to_bf16({text})"
        elif dtype == torch.float16:
            text = f"half_bits({text})" if text in self.half_exact else \
                f"float_to_half({self.half_rounded.get(text, text)})"
        elif dtype != value.dtype:
            text = f"static_cast<{storage_type(dtype)}>({text})"
        if is_empty(name, self.extents):
            return f"// {name} has no elements: nothing stored"
        position = cpp_index(self.index_hook(index), name, self.checked, self.site, "store")
        return f"{self.pointer(name)}[{position}] = {text};"

    def indirect_indexing(self, value, size, check=True):
        if self._hoists() and value.name in self.hoist.invariant:
            text = f"static_cast<int64_t>({value.name})" if not check else \
                f"jit_wrap_index({value.name}, {index_text(size)}, {INDEX_ERROR_FLAG})"
            return self.hoist.value(text, torch.int64, lambda name, _: signed_symbol(name))
        symbol = signed_symbol(f"{self.prefix}_index{self.indirect_count}")
        self.indirect_count += 1
        if self.hoist is not None:
            self.hoist.add_variant(symbol.name)
        if not check:   # the lowering proved the value inside [0, size) (clamped pooling reads)
            self.lines.append(f"const int64_t {symbol.name} = "
                              f"static_cast<int64_t>({value.name});")
            return symbol
        # The flag is declared around the innermost loop (lines.py): checks stay vectorisable.
        # Under a mask (a piece of a cat, the inside of a pad), only the lanes it selects
        # check: the others read 0 for every value and may make any index.
        live = f", {self.predicate}" if self.predicate is not None else ""
        self.lines.append(f"const int64_t {symbol.name} = jit_wrap_index({value.name}, "
                          f"{index_text(size)}, {INDEX_ERROR_FLAG}{live});")
        return symbol

    def masked(self, mask, body, other):
        decided = self._truth(mask)
        if decided:      # the segment lies inside the mask: no test, no masked loads
            return body()
        if decided is False:
            dtype = self._masked_dtype(mask, body)
            return other if isinstance(other, CppValue) else self.constant(other, dtype)
        result = self.under_mask(mask.name, body)
        other_text = literal(other, result.dtype) if not isinstance(other, CppValue) \
            else other.name
        exact = result.name in self.bf16_exact and (
            other_text in self.bf16_exact if isinstance(other, CppValue) else
            result.dtype == torch.float32 and bf16_holds(other))
        chosen = self._exact(self.emit(f"{mask.name} ? {result.name} : {other_text}",
                                       result.dtype), exact)
        return self._half_exact(chosen, (result, other))

    def _truth(self, value) -> Optional[bool]:
        return self.facts.truth.get(value.name) if self.facts is not None else None

    def _masked_dtype(self, mask, body) -> torch.dtype:
        """The dtype `body` computes, its code thrown away (a segment outside the mask)."""
        lines, hoist = self.lines, self.hoist
        self.lines, self.hoist = [], None
        try:
            return self.under_mask(mask.name, body).dtype
        finally:
            self.lines, self.hoist = lines, hoist

    # -- values ----------------------------------------------------------------------------
    def constant(self, value, dtype):
        result = self.emit(literal(value, dtype), compute_dtype(dtype))
        if self.facts is not None:
            self.facts.constant(result.name, value, result.dtype)
        return self._exact(result, result.dtype == torch.float32 and bf16_holds(value))

    def index_expr(self, expr, dtype):
        dtype = compute_dtype(dtype)
        result = self.emit(f"static_cast<{storage_type(dtype)}>({self.index_hook(expr)})",
                           dtype)
        if self.facts is not None and not dtype.is_floating_point and dtype != torch.bool:
            self.facts.index(result.name, expr)
        return result

    def to_dtype(self, value, dtype, src_dtype=None):
        target = compute_dtype(dtype)
        if value.name in self.bf16_exact:
            if dtype == torch.bfloat16:     # a bfloat16 value already: its bits, as eager's
                return value
            if dtype in (torch.float32, torch.float64):
                # a float32 now: a later cast back to bfloat16 rounds it (NaN made quiet)
                value = self.emit(value.name, torch.float32)
        if dtype == torch.bfloat16:
            source = value if value.dtype == torch.float32 else self.to_dtype(value, torch.float32)
            rounded = self.emit(f"bf16_round({source.name})", torch.float32)
            self.bf16_exact.add(rounded.name)
            return rounded
        if value.name in self.half_exact:
            if dtype == torch.float16:      # a float16 value already: its bits, as eager's
                return value
            if dtype in (torch.float32, torch.float64):
                # a float32 now, a signalling NaN made quiet as eager's conversion does
                value = self.emit(f"half_quiet({value.name})", torch.float32)
        if dtype == torch.float16:
            source = value if value.dtype == torch.float32 else self.to_dtype(value, torch.float32)
            rounded = self.emit(f"half_round({source.name})", torch.float32)
            self.half_rounded[rounded.name] = source.name
            return rounded
        if value.dtype == target:
            return value
        if target == torch.bool:
            return self.emit(f"({value.name} != 0)", torch.bool)
        if value.dtype.is_floating_point and target in SMALL_INTEGERS:
            # Out-of-range floats wrap like eager's (through int32), not undefined behaviour.
            return self.emit(f"static_cast<{storage_type(target)}>(jit_float_to_int<int32_t>("
                             f"{value.name}))", target)
        if value.dtype.is_floating_point and target in (torch.int32, torch.int64):
            return self.emit(f"jit_float_to_int<{storage_type(target)}>({value.name})", target)
        if target.is_floating_point and not value.dtype.is_floating_point and \
                value.dtype != torch.bool:
            # An integer has no negative zero, but under -fno-trapping-math GCC folds a
            # float -> integer -> float round trip into trunc(x), which keeps the sign:
            # (float)(int64_t)-0.3f gave -0.0 (x / y.to(int64) the wrong infinity). Adding
            # +0.0 turns -0.0 into +0.0 and nothing else (GCC keeps it: signed zeros are
            # honoured). A select `v == 0 ? 0 : v` did that too, but handed GCC a constant 0
            # on one path, and it folded `0.0f / 0.0f` there to +NaN where the CPU's division
            # gives -NaN: `signbit(a / a)` of int32 zeros was False, eager True (seed 12125).
            text = f"static_cast<{storage_type(target)}>({value.name})"
            if value.dtype == torch.int64 and target == torch.float32:
                # vectorisable (prelude.h); a scalar cast again in conversion-only loops (lines.py)
                text = f"{INT64_TO_FLOAT}({value.name})"
            converted = self.emit(text, target)
            return self.emit(f"{converted.name} + {literal(0, target)}", target)
        return self.emit(f"static_cast<{storage_type(target)}>({value.name})", target)

    def where(self, condition, a, b):
        decided = self._truth(condition)
        if decided is not None and a.dtype == b.dtype:
            return a if decided else b
        chosen = self._exact(self.emit(f"{condition.name} ? {a.name} : {b.name}", a.dtype),
                             {a.name, b.name} <= self.bf16_exact)
        return self._half_exact(chosen, (a, b))

    # -- the table's operators and calls ---------------------------------------------------
    def infix(self, row, a, b):
        text = f"{a.name} {row.operator} {b.name}"
        if row.dtypes == BOOL:      # comparisons
            decided = self.facts.compare(row.name, a.name, b.name) if self.facts else None
            if decided is not None:
                return self.constant(decided, torch.bool)
            return self.emit(text, torch.bool)
        return self.emit(self._narrow(text, a.dtype), a.dtype)

    def call(self, row, function, values):
        text = f"{cpp_function(function, values[0].dtype)}" \
               f"({', '.join(value.name for value in values)})"
        dtype = row.result_dtype(values[0].dtype)
        if row.arity == 1 and function.startswith("jit_"):
            # the prelude's overloads of one operand (`jit_sign`, `jit_signbit`) narrow as
            # the one-operand operators do (redundant, and kept: the kernels' text is as it was)
            text = self._narrow(text, dtype)
        return self.emit(text, dtype)

    # -- arithmetic of C++'s own -----------------------------------------------------------
    def truediv(self, a, b):
        reciprocal = self.reciprocals.get(b.name)
        if reciprocal is not None and a.dtype == b.dtype:
            # Dividing by a per-row value inside a loop: multiply by its reciprocal, computed
            # once per row (as eager's softmax kernel does; within 1.5 ulp of division).
            return self.emit(f"{a.name} * {reciprocal}", a.dtype)
        return self.emit(f"{a.name} / {b.name}", a.dtype)

    def _divisor(self, b) -> str:
        """An integer divisor as the lanes a mask selects see it (1 for the others): the
        helpers raise eager's ZeroDivisionError for a zero divisor, and under a mask (a piece
        of a cat, the inside of a pad) the lanes it does not select read 0 for every value,
        though their quotients are thrown away."""
        if self.predicate is None or b.dtype.is_floating_point:
            return b.name
        return self.emit(f"{self.predicate} ? {b.name} : {literal(1, b.dtype)}", b.dtype).name

    def floordiv(self, a, b):
        name = "jit_floordiv_float" if a.dtype.is_floating_point else "jit_floordiv_int"
        return self.emit(f"{name}({a.name}, {self._divisor(b)})", a.dtype)

    def truncdiv(self, a, b):
        return self.emit(f"jit_truncdiv({a.name}, {self._divisor(b)})", a.dtype)

    def remainder(self, a, b):
        name = "jit_remainder_float" if a.dtype.is_floating_point else "jit_remainder_int"
        return self.emit(f"{name}({a.name}, {self._divisor(b)})", a.dtype)

    def fmod(self, a, b):
        if a.dtype.is_floating_point:
            return self.emit(f"jit_fmod({a.name}, {b.name})", a.dtype)
        return self.emit(f"jit_fmod_int({a.name}, {self._divisor(b)})", a.dtype)

    def pow(self, a, b):
        if a.dtype.is_floating_point:
            name = "powf" if a.dtype == torch.float32 else "pow"
            return self.emit(f"{name}({a.name}, {b.name})", a.dtype)
        return self.emit(f"jit_ipow({a.name}, {b.name})", a.dtype)

    def maximum(self, a, b):
        if a.dtype == torch.bool:
            return self.emit(f"{a.name} || {b.name}", a.dtype)
        return self.emit(f"jit_max({a.name}, {b.name})", a.dtype)

    def minimum(self, a, b):
        if a.dtype == torch.bool:
            return self.emit(f"{a.name} && {b.name}", a.dtype)
        return self.emit(f"jit_min({a.name}, {b.name})", a.dtype)

    def logical_and(self, a, b):
        folded = self._fold_logical(a, b, False)
        return folded if folded is not None else self.emit(f"{a.name} && {b.name}", torch.bool)

    def logical_or(self, a, b):
        folded = self._fold_logical(a, b, True)
        return folded if folded is not None else self.emit(f"{a.name} || {b.name}", torch.bool)

    def _fold_logical(self, a, b, absorbing: bool):
        """`a and b` (`absorbing` False) or `a or b` (True) where a segment decides an
        operand: the absorbing outcome, or the other operand; None otherwise."""
        if a.dtype != torch.bool or b.dtype != torch.bool:
            return None
        first, second = self._truth(a), self._truth(b)
        if absorbing in (first, second):
            return self.constant(absorbing, torch.bool)
        if first is not None:
            return b
        return a if second is not None else None

    def logical_xor(self, a, b):
        return self.emit(f"{a.name} != {b.name}", torch.bool)

    def special(self, name, values):
        if len(values) != 1:
            return None
        value = values[0]
        if name.startswith("vml_"):
            # eager's MKL VML function (prelude.h, `JIT_VML_UNARY`); libm/libmvec's where
            # torch has no VML (aarch64, builds without MKL): eager's own code there
            function = f"jit_{name}{_suffix(value)}" if vml_library() is not None else \
                cpp_function(BY_NAME[name[len("vml_"):]].cpp, value.dtype)
            return self.emit(f"{function}({value.name})", value.dtype)
        unary = UNARY_TEXT.get(name)
        if unary is None:
            return None
        text, dtype = unary(value)
        return self.emit(self._narrow(text, dtype), dtype)


def bf16_holds(value) -> bool:
    """Whether a constant, as a float32, has a zero low half (bfloat16 holds it: stored as its
    bits it is what rounding gives). NaN is left to rounding."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return False
    try:
        word = struct.unpack("<I", struct.pack("<f", value))[0]
    except (OverflowError, struct.error):
        return False
    return word & 0xFFFF == 0


def _suffix(value) -> str:
    return "f" if value.dtype == torch.float32 else ""


def _float_one(value) -> str:
    return "1.0f" if value.dtype == torch.float32 else "1.0"


UNARY_TEXT = {
    "neg": lambda v: (f"-{v.name}", v.dtype),
    "abs": lambda v: (f"jit_abs({v.name})" if v.dtype.is_floating_point
                      else f"({v.name} < 0 ? -{v.name} : {v.name})", v.dtype),
    "rsqrt": lambda v: (f"{_float_one(v)} / __builtin_sqrt{'f' if v.dtype == torch.float32 else ''}"
                        f"({v.name})", v.dtype),
    "reciprocal": lambda v: (f"{_float_one(v)} / {v.name}", v.dtype),
    "sigmoid": lambda v: (f"{_float_one(v)} / ({_float_one(v)} + "
                          f"{'expf' if v.dtype == torch.float32 else 'exp'}(-{v.name}))",
                          v.dtype),
    "isnan": lambda v: (f"{v.name} != {v.name}", torch.bool),
    # integers and bool are never infinite (jit_inf has no integer overload: a build error)
    "isinf": lambda v: (f"jit_abs({v.name}) == jit_inf({v.name})" if v.dtype.is_floating_point
                        else f"{v.name} != {v.name}", torch.bool),
    "isfinite": lambda v: (f"__builtin_isfinite({v.name})", torch.bool),
    "logical_not": lambda v: (f"!{v.name}", torch.bool),
    "bitwise_not": lambda v: (f"~{v.name}", v.dtype),
    "square": lambda v: (f"{v.name} * {v.name}", v.dtype),
}

