"""Reusing a reduction's summand in a later loop of the same kernel.

Input: the members of a row kernel (reduction stages followed by inner stages). Output: the
pairs where an inner stage recomputes, element by element, a non-trivial value a reduction
already computed (softmax's `exp(x - max)`), so the reduction loop can store that value into
the inner stage's output and the inner stage can load it back (from cache) instead of
recomputing it. Where that output is narrower (a bfloat16 or float16 softmax) the summand
goes through a float32 row array instead (`scratch`), as eager's reduced-precision softmax
keeps its row in float: the exponential is computed once, not once per loop.

Values are compared by structure: `StructureTracker` wraps any `ops` handler and names each
result by the operation that made it (`exp(sub(load(arg0,1000*x0 + y0),...))`); a tracker given
`preloaded` structures returns the stored value instead of recomputing a matching one.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import sympy
import torch

from inductor.ir.ops import OPERATIONS
from inductor.ir.symbols import simplify_index

OPAQUE = ("masked", "indirect_indexing")
SCRATCH_LIMIT = 16384   # the most elements of a row a float32 scratch array holds (64 KiB)
NARROW = (torch.bfloat16, torch.float16)


class StructureTracker:
    """An `ops` handler wrapper recording each value's structure (see the module docstring)."""

    def __init__(self, inner, ranges: dict, preloaded: Optional[dict] = None):
        self.inner = inner
        self.ranges = ranges
        self.preloaded = preloaded or {}
        self.structure: dict = {}
        self.seen: set = set()
        self.indirect: dict = {}     # index symbol made here -> a name by order of creation

    def key_of(self, value) -> str:
        known = self.structure.get(id(value))
        if known is not None:
            return known
        if isinstance(value, sympy.Basic):
            # Indirect index symbols are named by the handler that made them (`t3__index0`
            # here, `indirect0` in a structure-only run): compare them by order of creation.
            value = value.xreplace(self.indirect)
            return str(simplify_index(sympy.expand(value), self.ranges))
        return repr(value)

    def __getattr__(self, name: str) -> Callable:
        target = getattr(self.inner, name)
        if name not in OPERATIONS:
            return target  # e.g. store_text: not an operation of loop bodies

        def call(*args, **kwargs):
            if name in OPAQUE:
                result = target(*args, **kwargs)
                self.structure[id(result)] = f"{name}#{len(self.structure)}"
                if isinstance(result, sympy.Symbol):
                    self.indirect[result] = sympy.Symbol(f"indirect#{len(self.indirect)}",
                                                         integer=True)
                return result
            arguments = [self.key_of(argument) for argument in args]
            arguments += [f"{key}={self.key_of(value)}" for key, value in kwargs.items()]
            key = f"{name}({','.join(arguments)})"
            if key in self.preloaded:
                result = self.preloaded[key]()
            else:
                result = target(*args, **kwargs)
            self.structure[id(result)] = key
            self.seen.add(key)
            return result
        return call


class Placeholders:
    """An `ops` handler whose every result is a fresh object (for structure-only runs)."""

    def __init__(self):
        self.values: list = []

    def __getattr__(self, name: str) -> Callable:
        def call(*args, **kwargs):
            if name == "masked":
                args[1]()
            if name == "indirect_indexing":
                return sympy.Symbol(f"indirect{len(self.values)}", integer=True)
            value = object()
            self.values.append(value)
            return value
        return call


@dataclasses.dataclass
class Reuse:
    """`reduction`'s summand (structure `key`) is stored into `reader`'s output."""

    reduction: object   # Member
    reader: object      # Member
    key: str
    scratch: Optional[str] = None   # the float32 row array it goes through, if any


def find_reuses(stages: list, evaluate: Callable, ranges: dict, dtype_of: Callable,
                value_dtype: Callable, aliased: frozenset = frozenset(),
                row_elements: Optional[int] = None) -> list:
    """Pairs (reduction member, later inner member) where the inner member's body contains
    the reduction's summand and can hold it in its own output (same compute dtype; never an
    output in `aliased`, written over a buffer the kernel reads), or in a float32 row array
    where the output is bfloat16 or float16 and the rows have `row_elements` (known, at most
    SCRATCH_LIMIT)."""
    summands = []
    reuses: list = []
    for stage in stages:
        for member in stage.members:
            tracker = StructureTracker(Placeholders(), ranges)
            value = evaluate(member, tracker)
            if stage.kind == "reduction":
                key = tracker.key_of(value)
                if not key.startswith(("load(", "constant(", "index_expr(")):
                    summands.append((member, key))
                continue
            if stage.kind != "inner" or not member.store:
                continue
            if getattr(member.node.buffer, "mutated_input", None) or \
                    member.node.written_name() in aliased:
                continue    # an input, or a buffer over memory the reduction loop still reads
            # The latest reduction first: its summand usually contains the earlier ones'
            # (softmax with a bias: `exp(x + bias - max)` holds `x + bias`).
            for reduction, key in reversed(summands):
                taken = any(reuse.reduction is reduction or reuse.reader is member
                            for reuse in reuses)
                if key not in tracker.seen or taken:
                    continue
                written = dtype_of(member.node.written_name())
                if written == value_dtype(reduction):
                    reuses.append(Reuse(reduction, member, key))
                elif written in NARROW and value_dtype(reduction) == torch.float32 and \
                        row_elements is not None and 0 < row_elements <= SCRATCH_LIMIT:
                    reuses.append(Reuse(reduction, member, key, f"jit_row{len(reuses)}"))
    return reuses
