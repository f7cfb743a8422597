"""Triton text for reductions: whole-row reductions held in registers, block accumulators of
looped and split reductions, and the combine of split partials.

Input: a reduction type, the compute dtype of the reduced values, the value's Triton text
and the lane mask. Output: lines and the name of a `[XBLOCK, 1]` result. Every reduction goes
through `jit_reduce` (`tl.reduce` on GPUs) with a prelude combine function (NaN-propagating
max/min, argmax/argmin with index tie-break, Welford merge), so the interpreter and the GPU
run the same code.
"""
from __future__ import annotations

from typing import Optional

import torch

from inductor.codegen.triton.expressions import literal, triton_type
from inductor.ir.nodes import WELFORD, WELFORD_PART

COMBINE = {"sum": "jit_sum", "prod": "jit_prod", "max": "jit_maximum", "min": "jit_minimum",
           "any": "jit_any", "all": "jit_all", "argmax": "jit_argmax", "argmin": "jit_argmin"}
LAST_INDEX = "9223372036854775807"
PLAIN = ("sum", "prod", "max", "min", "any", "all")   # one accumulator, no mask in the update


def identity(reduction_type: str, dtype: torch.dtype) -> str:
    """The neutral element of a reduction over `dtype` values, as Triton text."""
    if reduction_type in ("sum",) + WELFORD:
        return literal(0, dtype)[0]
    if reduction_type == "prod":
        return literal(1, dtype)[0]
    if reduction_type == "any":
        return "False"
    if reduction_type == "all":
        return "True"
    low, high = _bounds(dtype)
    if reduction_type in ("max", "argmax"):
        return literal(low, dtype)[0]
    if reduction_type in ("min", "argmin"):
        return literal(high, dtype)[0]
    raise NotImplementedError(reduction_type)


def _bounds(dtype: torch.dtype) -> tuple:
    if dtype.is_floating_point:
        return float("-inf"), float("inf")
    if dtype == torch.bool:
        return 0, 1
    information = torch.iinfo(dtype)
    return information.min, information.max


def result_dtype(reduction_type: str, dtype: torch.dtype) -> torch.dtype:
    return torch.int64 if reduction_type in ("argmax", "argmin") else dtype


class Accumulator:
    """The state of one reduction accumulated over blocks of a row (looped and split).

    `name` prefixes its variables; `dtype` is the compute dtype of the reduced values.
    """

    def __init__(self, name: str, reduction_type: str, dtype: torch.dtype):
        self.name = name
        self.type = reduction_type
        self.dtype = dtype

    def variables(self) -> list:
        """(name, dtype) of each accumulator variable (and of each split partial)."""
        if self.type in WELFORD:
            return [(f"{self.name}_mean", self.dtype), (f"{self.name}_m2", self.dtype),
                    (f"{self.name}_weight", self.dtype)]
        if self.type in ("argmax", "argmin"):
            return [(self.name, self.dtype), (f"{self.name}_index", torch.int64)]
        return [(self.name, self.dtype)]

    def declare(self, shape: str) -> list[str]:
        lines = []
        for position, (name, dtype) in enumerate(self.variables()):
            start = LAST_INDEX if position == 1 and self.type in ("argmax", "argmin") else \
                identity(self.type if self.type not in WELFORD else "sum", dtype)
            lines.append(f"{name} = tl.full({shape}, {start}, {triton_type(dtype)})")
        return lines

    def update(self, value: str, mask: Optional[str], index: str) -> list[str]:
        """Fold `value` (at reduction positions `index`) into the accumulator. `mask` None:
        a sum whose masked lanes already hold 0 (see `identity_lanes`)."""
        name = self.name
        masked = value if mask is None else \
            f"tl.where({mask}, {value}, {identity(self.type, self.dtype)})"
        if self.type in WELFORD:
            return [f"{name}_mean, {name}_m2, {name}_weight = jit_welford_update("
                    f"{name}_mean, {name}_m2, {name}_weight, {value}, {mask})"]
        if self.type in ("argmax", "argmin"):
            return [f"{name}, {name}_index = {COMBINE[self.type]}({name}, {name}_index, "
                    f"{masked}, tl.where({mask}, ({index}).to(tl.int64), {LAST_INDEX}))"]
        return [f"{name} = {COMBINE[self.type]}({name}, {masked})"]

    def finish(self, result: str) -> list[str]:
        """Reduce the block accumulator along the row into `result` ([XBLOCK, 1])."""
        names = ", ".join(name for name, _dtype in self.variables())
        if self.type in WELFORD:
            return self._welford_rows(names, result)
        if self.type in ("argmax", "argmin"):
            return [f"_, {result} = jit_reduce(({names}), 1, {COMBINE[self.type]})",
                    f"{result} = {result}[:, None]"]
        return [f"{result} = jit_reduce({names}, 1, {COMBINE[self.type]})[:, None]"]

    def finish_partials(self) -> list[str]:
        """Reduce each accumulator variable along the row, in place (split partial kernel)."""
        names = [name for name, _dtype in self.variables()]
        joined = ", ".join(names)
        if self.type in WELFORD:
            return [f"{joined} = jit_reduce(({joined}), 1, jit_welford_combine)"]
        if self.type in ("argmax", "argmin"):
            return [f"{joined} = jit_reduce(({joined}), 1, {COMBINE[self.type]})"]
        return [f"{joined} = jit_reduce({joined}, 1, {COMBINE[self.type]})"]

    def combine_partials(self, loads: list, result: str) -> list[str]:
        """Combine partials loaded as `[XBLOCK, SBLOCK]` tensors (one per variable)."""
        joined = ", ".join(loads)
        if self.type in WELFORD:
            return self._welford_rows(joined, result)
        if self.type in ("argmax", "argmin"):
            return [f"_, {result} = jit_reduce(({joined}), 1, {COMBINE[self.type]})",
                    f"{result} = {result}[:, None]"]
        return [f"{result} = jit_reduce({joined}, 1, {COMBINE[self.type]})[:, None]"]

    def _welford_rows(self, triples: str, result: str) -> list[str]:
        """Combine Welford triples along the row; keep every part (a `SharedPass` may read
        the one `result` does not take)."""
        name = self.name
        return [f"{name}_mean_row, {name}_m2_row, _ = jit_reduce(({triples}), 1, "
                "jit_welford_combine)",
                f"{result} = {name}_{WELFORD_PART[self.type]}_row[:, None]"]

    def partial_filler(self, position: int) -> str:
        """What a missing partial (masked lane) holds for variable `position`."""
        if self.type in WELFORD:
            return "0.0"
        if position == 1 and self.type in ("argmax", "argmin"):
            return LAST_INDEX
        return identity(self.type, self.dtype)


class SharedPass(Accumulator):
    """A Welford reduction reading the pass of an earlier accumulator over the same values
    (`source`, a plan member's `shares`): no state and no updates of its own; its result is
    the other part of that accumulator's combined row (layer norm's mean beside its
    variance)."""

    def __init__(self, source: str, reduction_type: str, dtype: torch.dtype):
        super().__init__(source, reduction_type, dtype)

    def variables(self) -> list:
        return []

    def declare(self, shape: str) -> list[str]:
        return []

    def update(self, value: str, mask: Optional[str], index: str) -> list[str]:
        return []

    def finish(self, result: str) -> list[str]:
        return [f"{result} = {self.name}_{WELFORD_PART[self.type]}_row[:, None]"]

    def finish_partials(self) -> list[str]:
        return []

    def combine_partials(self, loads: list, result: str) -> list[str]:
        return self.finish(result)


class OnlineSoftmax(Accumulator):
    """A max reduction and the sum of `exp(v - max)` over the same values in one pass: per
    lane a running maximum and a running sum rescaled whenever the maximum grows."""

    def __init__(self, name: str, dtype: torch.dtype):
        super().__init__(name, "max", dtype)

    def variables(self) -> list:
        return [(self.name, self.dtype), (f"{self.name}_sum", self.dtype)]

    def declare(self, shape: str) -> list[str]:
        kind = triton_type(self.dtype)
        return [f'{self.name} = tl.full({shape}, float("-inf"), {kind})',
                f"{self.name}_sum = tl.full({shape}, 0, {kind})"]

    def update(self, value: str, mask: str, index: str) -> list[str]:
        name = self.name
        return [f'{name}_value = tl.where({mask}, {value}, float("-inf"))',
                f"{name}_next = jit_maximum({name}, {name}_value)",
                f'{name}_sum = tl.where({name}_next == float("-inf"), 0.0, {name}_sum * '
                f"tl.exp({name} - {name}_next) + tl.exp({name}_value - {name}_next))",
                f"{name} = {name}_next"]

    def finish_pair(self, maximum: str, total: str) -> list[str]:
        """The row's maximum into `maximum` and its sum of exp(v - maximum) into `total`."""
        name = self.name
        return [f"{maximum} = jit_reduce({name}, 1, jit_maximum)[:, None]",
                f'{name}_scaled = tl.where({name} == float("-inf"), 0.0, '
                f"{name}_sum * tl.exp({name} - {maximum}))",
                f"{total} = jit_reduce({name}_scaled, 1, jit_sum)[:, None]"]


def identity_lanes(reduction_type: str, value: str, handler, row_full: bool = False) -> bool:
    """Whether no select is needed around `value` before folding it: no lane lies past the
    row's end (`row_full`: the row blocks divide the row, for the reductions whose update
    takes no mask), or `value` already holds the identity there (a sum of a load whose mask
    includes `rmask`, `other=0`). The select was 16 of 110 instructions per block of a sum
    over the first dim on sm_90. Lanes past the last row (`xmask` off) may hold anything:
    nothing stores them."""
    if row_full:
        return reduction_type in PLAIN
    mask = handler.zero_filled.get(value)
    return reduction_type == "sum" and mask is not None and "rmask" in mask.split(" & ")


def row_mean(reduction_type: str, result: str) -> str:
    """The name `whole_row` gives the row mean of a Welford reduction into `result`."""
    return result if reduction_type == "welford_mean" else f"{result}_mean"


def whole_row(reduction_type: str, dtype: torch.dtype, value: str, mask: Optional[str],
              index: str, count: int, result: str, mean: Optional[str] = None) -> list[str]:
    """A reduction of a row held in registers ([XBLOCK, RBLOCK]) into `result`. `mask` None:
    no lane needs the identity (see `identity_lanes`; for any reduction where the block is
    the row). `mean`: for a Welford reduction sharing an earlier one's pass, the name of that
    one's row mean (`row_mean`)."""
    def select(text: str, other: str) -> str:
        return text if mask is None else f"tl.where({mask}, {text}, {other})"
    if reduction_type in WELFORD:
        # The mean of the sum, corrected by the mean deviation from it: exact for a row of
        # equal values, as the Welford pass is (`sum / count` alone is an ulp off there, and
        # layer norm's rstd amplified it: seeds 12440, 12769); the squared deviations from it.
        zero = literal(0, dtype)[0]
        if mean is not None:
            lines = [f"{result} = {mean}"] if reduction_type == "welford_mean" else []
        else:
            mean = row_mean(reduction_type, result)
            lines = [f"{result}_first = jit_reduce({select(value, zero)}, 1, jit_sum)[:, None]"
                     f" / {count}",
                     f"{mean} = {result}_first + jit_reduce("
                     f"{select(f'{value} - {result}_first', zero)}, 1, jit_sum)[:, None] / "
                     f"{count}"]
        if reduction_type == "var_m2":
            lines += [f"{result}_deviation = {select(f'{value} - {mean}', zero)}",
                      f"{result} = jit_reduce({result}_deviation * {result}_deviation, 1, "
                      f"jit_sum)[:, None]"]
        return lines
    masked = select(value, identity(reduction_type, dtype))
    if reduction_type in ("argmax", "argmin"):
        positions = f"({index}).to(tl.int64)"
        # unmasked, the positions ([1, RBLOCK]) still need the values' shape
        positions = f"tl.broadcast_to({positions}, {value}.shape)" if mask is None \
            else select(positions, LAST_INDEX)
        return [f"_, {result} = jit_reduce(({masked}, {positions}), 1, "
                f"{COMBINE[reduction_type]})",
                f"{result} = {result}[:, None]"]
    return [f"{result} = jit_reduce({masked}, 1, {COMBINE[reduction_type]})[:, None]"]
