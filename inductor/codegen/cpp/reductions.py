"""C++ accumulators for reductions: per-lane partials the compiler vectorises, a scalar
accumulator for tails, and the final combine.

Input: a reduction type, the compute dtype of the values and the C++ name to use. Output:
the declaration, per-element update (lane or scalar), per-block hooks and final combine
lines. Lanes are arrays indexed by the vectorised loop variable, so any combine function
(NaN-propagating max, argmax with index tie-break, Welford) vectorises the same way.

Argmax/argmin lanes whose reduction positions only grow (`ordered`, the kernel proves it from
the index expression) update with two selects: a lane takes a strictly better value, or the
first NaN (a later equal value or NaN never wins a tie against an earlier one). The full
three-way compare (`argmax_takes`: NaN, value, then index) runs only where lanes, tails and
thread partials meet; per element it kept GCC from vectorising (4.1 ms against eager's 1.5
for argmax along 1024 x 1024). The lane positions are int32 where the reduction is known to
have fewer than 2**31 elements: the same width as float32 values, one vector each.
"""
from __future__ import annotations

from typing import Optional

import sympy
import torch

from inductor.codegen.cpp.expressions import literal, storage_type
from inductor.ir.nodes import WELFORD
from inductor.ir.symbols import linear_coefficient

FLUSH_BLOCKS = 64   # vector blocks between folds of float sums into double
NARROW_INDEX_LIMIT = 2 ** 31   # reductions with fewer elements keep int32 lane positions
LANES = 16          # one AVX-512 vector of float32
WIDE_LANES = 64     # four vectors: independent accumulators hide the add latency


def lanes_for(extent: int, reductions: tuple = ()) -> int:
    """Lanes for a vectorised loop of `extent` iterations (0: scalar only) folding the
    `reductions` (their IR data: `reduction_type`, `src_dtype`). Lanes of more than four bytes
    (an int64 or float64 value, argmax's value and position) come 32 to a loop rather than 64:
    64 took all 16 AVX2 registers and spilled (argmax along rows of 1024: 15% slower)."""
    if extent >= 16 * WIDE_LANES:   # measured: on rows of 256, 16 lanes beat 64 by 25%
        wide = any(_lane_bytes(data.reduction_type, data.src_dtype) > 4 for data in reductions)
        return WIDE_LANES // 2 if wide else WIDE_LANES
    return LANES if extent >= LANES else 0


def _lane_bytes(reduction_type: str, dtype: torch.dtype) -> int:
    """Bytes of one lane's state (Welford's two arrays left out: they keep 64 lanes, whose
    count its values depend on)."""
    size = 4 if dtype in (torch.float16, torch.bfloat16) else dtype.itemsize
    if reduction_type in WELFORD:
        return 4
    return size + 4 if reduction_type in ("argmax", "argmin") else size


def positions_ascend(position, variables: list, sizes: list) -> bool:
    """Whether the reduction position `position` (a sympy expression of the loop `variables`,
    outermost first, of extents `sizes`) grows with every step of the loop nest: linear in
    each variable, with each coefficient above the most that the loops inside it add (a
    row-major position over the loops). False where that cannot be shown."""
    coefficients = [linear_coefficient(position, variable) for variable in variables]
    if any(coefficient is None for coefficient in coefficients):
        return False
    rest = sympy.expand(position - sum(c * v for c, v in zip(coefficients, variables)))
    if rest.free_symbols & set(variables):
        return False
    inside = sympy.Integer(0)    # the most the loops inside the current one add
    for coefficient, size in reversed(list(zip(coefficients, sizes))):
        margin = sympy.expand(coefficient - inside - 1)
        if not (margin.is_Integer and margin >= 0):
            return False
        inside = sympy.expand(inside + coefficient * (size - 1))
    return True


def static_elements(sizes: list) -> Optional[int]:
    """The number of iterations of loops of these extents, None where one is symbolic."""
    elements = 1
    for size in sizes:
        if not isinstance(size, (int, sympy.Integer)):
            return None
        elements *= int(size)
    return elements


def positions_fit_int32(sizes: list) -> bool:
    """Whether a reduction over loops of these extents has fewer than 2**31 elements (False
    for a symbolic extent)."""
    elements = static_elements(sizes)
    return elements is not None and elements < NARROW_INDEX_LIMIT


def identity(reduction_type: str, dtype: torch.dtype) -> str:
    """The neutral element of a reduction, as C++."""
    storage_type(dtype)  # refuses a dtype C++ cannot hold, before any reduction type
    if reduction_type in ("sum",) + WELFORD:
        return literal(0, dtype)
    if reduction_type == "prod":
        return literal(1, dtype)
    if reduction_type == "any":
        return "false"
    if reduction_type == "all":
        return "true"
    if reduction_type in ("max", "argmax"):
        return literal(float("-inf"), dtype) if dtype.is_floating_point \
            else literal(_integer_bounds(dtype)[0], dtype)
    if reduction_type in ("min", "argmin"):
        return literal(float("inf"), dtype) if dtype.is_floating_point \
            else literal(_integer_bounds(dtype)[1], dtype)
    raise NotImplementedError(reduction_type)


def _integer_bounds(dtype: torch.dtype) -> tuple:
    if dtype == torch.bool:
        return (0, 1)
    information = torch.iinfo(dtype)
    return (information.min, information.max)


def combine(reduction_type: str, accumulator: str, value: str) -> str:
    """The new accumulator value after folding in `value`."""
    return {
        "sum": f"{accumulator} + {value}",
        "prod": f"{accumulator} * {value}",
        "max": f"jit_max({value}, {accumulator})",
        "min": f"jit_min({value}, {accumulator})",
        "any": f"{accumulator} || {value}",
        "all": f"{accumulator} && {value}",
    }[reduction_type]


def _nan_sticky(reduction_type: str, dtype: torch.dtype, lane: str, value: str) -> str:
    """A float max/min lane update in three vector operations (max, unordered compare, or),
    where `jit_max` takes four (two compares, an or and a blend): the larger value (x86's
    maxps: the lane itself if either is NaN, so a NaN lane stays NaN), its bits ORed with
    all ones when `value` is NaN (a NaN). amax along rows of 1024: 8-15% less time, 12% more
    with the lanes' final fold written the same way."""
    bits, ones = ("uint32_t", "0xFFFFFFFFu") if dtype == torch.float32 else \
        ("uint64_t", "0xFFFFFFFFFFFFFFFFull")
    c_type = storage_type(dtype)
    better = ">" if reduction_type == "max" else "<"
    return (f"__builtin_bit_cast({c_type}, __builtin_bit_cast({bits}, {value} {better} {lane} ? "
            f"{value} : {lane}) | ({value} != {value} ? {ones} : 0))")


def _nan_first(reduction_type: str, lane: str, value: str) -> str:
    """A float max/min lane update as two selects (a NaN `value`, else the better one: a NaN
    lane stays), for values widened from bfloat16/float16 loads into 16 lanes: there
    `_nan_sticky`'s bit operations kept g++ 12 from vectorising the loop ("control flow in
    loop"; bf16 rows of 64 and 256: softmax 1.5-3x eager's time, amax 5.5x at 256; with this
    form 0.8x and 0.4x). With 64 lanes (rows of 1024 and more) and on float32 loads
    `_nan_sticky` vectorises and is the cheaper (amax along float32 rows of 1024: 77-82 vs 102
    us with this form)."""
    better = ">" if reduction_type == "max" else "<"
    return f"{value} != {value} ? {value} : ({value} {better} {lane} ? {value} : {lane})"


class Accumulator:
    """The C++ state of one reduction inside one loop nest.

    `lanes`: 0 for a scalar accumulator only, else the lane count of the vector part.
    `value_dtype`: the compute dtype of the reduced values (the accumulator for argmax
    holds a value and an int64 index). `ordered`: each lane sees growing reduction positions
    (argmax/argmin lanes then update without comparing positions); `narrow`: the positions
    fit int32 (lane positions of an ordered argmax/argmin are then int32).
    """

    shared = False      # a `SharedPass` reads another accumulator's state

    def __init__(self, name: str, reduction_type: str, value_dtype: torch.dtype, lanes: int,
                 terms: int = 0, ordered: bool = False, narrow: bool = False,
                 widened: bool = False):
        self.name = name
        # the reduced values are loaded as bfloat16/float16 and widened (`_lane_combine`)
        self.widened = widened
        self.ordered = ordered and reduction_type in ("argmax", "argmin")
        self.index_type = "int32_t" if self.ordered and narrow else "int64_t"
        self.type = reduction_type
        self.dtype = value_dtype
        self.c_type = storage_type(value_dtype)
        self.lanes = lanes
        # Long float sums (more than `terms` > FLUSH_BLOCKS blocks) fold their lanes into a
        # double every FLUSH_BLOCKS vector blocks, so no lane accumulates more than a few
        # thousand terms in single precision; short ones stay in float (a double scalar would
        # turn the final fold into a chain of scalar adds).
        self.blocked = reduction_type == "sum" and value_dtype == torch.float32 and \
            terms > FLUSH_BLOCKS * max(lanes, LANES)
        self.scalar_type = "double" if self.blocked else self.c_type

    # -- declarations ----------------------------------------------------------------------
    def declare(self) -> list[str]:
        init = identity(self.type, self.dtype) if self.type not in WELFORD else None
        name, c_type, lanes = self.name, self.c_type, self.lanes
        lines = []
        if self.type in WELFORD:
            lines.append(f"Welford<{c_type}> {name} = {{0, 0, 0}};")
            if lanes:
                lines += [f"{c_type} {name}_mean[{lanes}] = {{}};",
                          f"{c_type} {name}_m2[{lanes}] = {{}};",
                          f"{c_type} {name}_count = 0;"]
            return lines
        lines.append(f"{self.scalar_type} {name} = {init};")
        if self.type in ("argmax", "argmin"):
            lines.append(f"int64_t {name}_index = 0;")
        if lanes:
            lines.append(f"{c_type} {name}_lanes[{lanes}];")
            lines.append(f"for (int lane = 0; lane < {lanes}; ++lane) "
                         f"{name}_lanes[lane] = {init};")
            if self.type in ("argmax", "argmin"):
                lines.append(f"{self.index_type} {name}_lane_index[{lanes}] = {{}};")
        return lines

    # -- per element -----------------------------------------------------------------------
    def before_block(self) -> list[str]:
        """Lines before one vector block (all lanes advance together)."""
        if self.type in WELFORD and self.lanes:
            return [f"const {self.c_type} {self.name}_step = 1 / ({self.name}_count + 1);"]
        return []

    def after_block(self) -> list[str]:
        """Lines after one vector block."""
        if self.type in WELFORD and self.lanes:
            return [f"{self.name}_count += 1;"]
        return []

    def flush(self) -> list[str]:
        """Lines after FLUSH_BLOCKS vector blocks: a `blocked` sum folds its lanes into its
        double and starts them again from 0."""
        if not (self.blocked and self.lanes):
            return []
        name, lanes = self.name, self.lanes
        return ["{ float flushed = 0;",
                "  #pragma omp simd reduction(+:flushed)",
                f"  for (int lane = 0; lane < {lanes}; ++lane) flushed += {name}_lanes[lane];",
                f"  {name} += flushed;",
                f"  for (int lane = 0; lane < {lanes}; ++lane) {name}_lanes[lane] = 0; }}"]

    def update_lane(self, value: str, lane: str, index: str) -> list[str]:
        """Fold `value` (at reduction position `index`) into lane `lane`."""
        name = self.name
        if self.type in WELFORD:
            return [f"{{ const {self.c_type} delta = {value} - {name}_mean[{lane}];",
                    f"  {name}_mean[{lane}] += delta * {name}_step;",
                    f"  {name}_m2[{lane}] += delta * ({value} - {name}_mean[{lane}]); }}"]
        if self.ordered:
            return self._ordered_update(value, lane, index)
        if self.type in ("argmax", "argmin"):
            takes = f"{self.type}_takes({value}, {index}, {name}_lanes[{lane}], " \
                    f"{name}_lane_index[{lane}])"
            return [f"{{ const bool take = {takes};",
                    f"  {name}_lanes[{lane}] = take ? {value} : {name}_lanes[{lane}];",
                    f"  {name}_lane_index[{lane}] = take ? {index} : "
                    f"{name}_lane_index[{lane}]; }}"]
        slot = f"{name}_lanes[{lane}]"
        return [f"{slot} = {self._lane_combine(slot, value)};"]

    def _lane_combine(self, lane: str, value: str) -> str:
        """The lane after folding `value` into it (C++ text)."""
        if self.type in ("max", "min") and self.dtype in (torch.float32, torch.float64):
            if self.widened and self.lanes <= LANES:
                return _nan_first(self.type, lane, value)
            return _nan_sticky(self.type, self.dtype, lane, value)
        return combine(self.type, lane, value)

    def _ordered_update(self, value: str, lane: str, index: str) -> list[str]:
        """An argmax/argmin lane update when `index` exceeds every position the lane holds:
        take a strictly better value, or a NaN while the lane holds none (see the module
        docstring); two selects, no position compare."""
        name, slot = self.name, f"{self.name}_lanes[{lane}]"
        better = ">" if self.type == "argmax" else "<"
        return [f"{{ const {self.c_type} best = {slot};",
                f"  const bool take = ({value} {better} best) | "
                f"(({value} != {value}) & (best == best));",
                f"  {slot} = take ? {value} : best;",
                f"  {name}_lane_index[{lane}] = take ? ({self.index_type})({index}) : "
                f"{name}_lane_index[{lane}]; }}"]

    def update_scalar(self, value: str, index: str) -> list[str]:
        name = self.name
        if self.type in WELFORD:
            return [f"{name} = welford_merge({name}, Welford<{self.c_type}>{{{value}, 0, 1}});"]
        if self.type in ("argmax", "argmin"):
            return [f"if ({self.type}_takes({value}, {index}, {name}, {name}_index)) "
                    f"{{ {name} = {value}; {name}_index = {index}; }}"]
        if self.type == "sum" and self.dtype.is_floating_point:
            # never vectorised by the compiler (GCC 12.2 miscompiles it: prelude's JIT_OPAQUE)
            return [f"{name} = {combine(self.type, name, value)}; JIT_OPAQUE({name});"]
        return [f"{name} = {combine(self.type, name, value)};"]

    # -- result ----------------------------------------------------------------------------
    def finish(self) -> tuple[list[str], str]:
        """Lines folding the lanes into the scalar, and the C++ expression of the result."""
        name, lanes = self.name, self.lanes
        lines = []
        if self.type in WELFORD:
            if lanes:
                # Every lane saw the same count: the mean of means and the spread of the lane
                # means combine them in two vectorised passes, then one merge with the tail.
                # The mean of means is lane 0's plus the mean deviation from it: exact where
                # the lanes agree (a row of equal values), where a sum of the lane means
                # rounds (3x) and the normalisation amplified that (seed 12769).
                c_type = self.c_type
                lines += [f"{c_type} {name}_mean_sum = 0, {name}_m2_sum = 0, "
                          f"{name}_spread = 0;",
                          f"#pragma omp simd reduction(+:{name}_mean_sum, {name}_m2_sum)",
                          f"for (int lane = 0; lane < {lanes}; ++lane) {{ {name}_mean_sum += "
                          f"{name}_mean[lane] - {name}_mean[0]; "
                          f"{name}_m2_sum += {name}_m2[lane]; }}",
                          f"const {c_type} {name}_lanes_mean = {name}_mean[0] + "
                          f"{name}_mean_sum / {lanes};",
                          f"#pragma omp simd reduction(+:{name}_spread)",
                          f"for (int lane = 0; lane < {lanes}; ++lane) {{ const {c_type} d = "
                          f"{name}_mean[lane] - {name}_lanes_mean; {name}_spread += d * d; }}",
                          f"{name} = welford_merge({name}, Welford<{c_type}>{{{name}_lanes_mean, "
                          f"{name}_m2_sum + {name}_count * {name}_spread, "
                          f"{name}_count * {lanes}}});"]
            return lines, f"{name}.m2" if self.type == "var_m2" else f"{name}.mean"
        if self.type in ("argmax", "argmin"):
            if lanes:
                lines.append(f"for (int lane = 0; lane < {lanes}; ++lane) if ({self.type}_takes("
                             f"{name}_lanes[lane], {name}_lane_index[lane], {name}, "
                             f"{name}_index)) {{ {name} = {name}_lanes[lane]; "
                             f"{name}_index = {name}_lane_index[lane]; }}")
            return lines, f"{name}_index"
        if lanes:
            lines += self._tree_fold()
            lines.append(f"{name} = {combine(self.type, name, f'{name}_lanes[0]')};")
        return lines, name

    def _tree_fold(self) -> list[str]:
        """Halve the lanes until one is left: log2(lanes) vectorised steps instead of a chain
        of `lanes` dependent operations (compilers fold `omp simd reduction` epilogues in lane
        order, one scalar add at a time). Each step is its own loop of a constant width: a
        loop over a run-time `width` compiled to vector loops with run-time trip counts and
        scalar epilogues, a third of amax's time along rows of 1024."""
        slot, lines, width = f"{self.name}_lanes", [], self.lanes // 2
        while width:
            lines += ["#pragma omp simd",
                      f"for (int lane = 0; lane < {width}; ++lane) {slot}[lane] = "
                      f"{self._lane_combine(f'{slot}[lane]', f'{slot}[lane + {width}]')};"]
            width //= 2
        return lines

    def result_dtype(self) -> torch.dtype:
        return torch.int64 if self.type in ("argmax", "argmin") else self.dtype

    def lane_result(self, lane: str) -> str:
        """The result of lane `lane` (C++ text) when each lane reduces for its own output."""
        name = self.name
        if self.type in WELFORD:
            return f"{name}_m2[{lane}]" if self.type == "var_m2" else f"{name}_mean[{lane}]"
        if self.type in ("argmax", "argmin"):
            return f"{name}_lane_index[{lane}]"
        return f"{name}_lanes[{lane}]"

    # -- partials of threads (`threads` is C++ text: the team size at run time) -------------
    def partial_arrays(self, threads: str) -> list[str]:
        """The declaration of one partial per thread, each the identity."""
        if self.shared:
            return []
        name, c_type = self.name, self.scalar_type
        loop = f"for (int part = 0; part < {threads}; ++part)"
        if self.type in WELFORD:
            return [f"Welford<{c_type}> {name}_partial[{threads}];",
                    f"{loop} {name}_partial[part] = Welford<{c_type}>{{0, 0, 0}};"]
        lines = [f"{c_type} {name}_partial[{threads}];",
                 f"{loop} {name}_partial[part] = {name};"]
        if self.type in ("argmax", "argmin"):
            lines += [f"int64_t {name}_partial_index[{threads}];",
                      f"{loop} {name}_partial_index[part] = 0;"]
        return lines

    def store_partial(self, target: str) -> list[str]:
        """This (thread-local) accumulator stored as the thread's partial of `target`."""
        if self.shared:
            return []
        if self.type in ("argmax", "argmin"):
            return [f"{target}_partial[thread] = {self.name};",
                    f"{target}_partial_index[thread] = {self.name}_index;"]
        return [f"{target}_partial[thread] = {self.name};"]

    def combine_partials(self, threads: str) -> list[str]:
        """The partials folded into this accumulator in thread order."""
        if self.shared:
            return []
        name = self.name
        loop = f"for (int part = 0; part < {threads}; ++part)"
        if self.type in WELFORD:
            return [f"{loop} {name} = welford_merge({name}, {name}_partial[part]);"]
        if self.type in ("argmax", "argmin"):
            return [f"{loop} if ({self.type}_takes({name}_partial[part], "
                    f"{name}_partial_index[part], {name}, {name}_index)) {{ {name} = "
                    f"{name}_partial[part]; {name}_index = {name}_partial_index[part]; }}"]
        return [f"{loop} {name} = {combine(self.type, name, f'{name}_partial[part]')};"]


class SharedPass(Accumulator):
    """A Welford reduction reading the pass of an earlier accumulator over the same values
    (`source`, a plan member's `shares`): no state and no updates of its own, its result is
    the other part of that accumulator's merged triple (layer norm's mean beside its
    variance)."""

    shared = True

    def __init__(self, source: str, reduction_type: str, value_dtype: torch.dtype, lanes: int):
        super().__init__(source, reduction_type, value_dtype, lanes)

    def declare(self) -> list[str]:
        return []

    def before_block(self) -> list[str]:
        return []

    def after_block(self) -> list[str]:
        return []

    def update_lane(self, value: str, lane: str, index: str) -> list[str]:
        return []

    def update_scalar(self, value: str, index: str) -> list[str]:
        return []

    def finish(self) -> tuple[list[str], str]:
        return [], f"{self.name}.m2" if self.type == "var_m2" else f"{self.name}.mean"
