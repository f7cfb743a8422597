"""The innermost loop of a pointwise kernel split where its body's position tests change.

Input: the comparisons of a kernel body (through the C++ `ops` handler, ops.py) between an
index linear in the innermost loop variable and constants. Output: the segments of that
loop's range over which every such test has one outcome, and, while one segment is printed,
the tests decided for it (so `masked` and `where` on them keep one side only).

A `cat` along the innermost dimension tested each element's position against every input's
range and loaded every input under its mask, then selected (1024x2048 of two 1024x1024
inputs: 0.9-1.3 ms against eager's 0.46-0.76). Split at the inputs' boundaries, each loop
copies one input with no test (`F.pad`'s borders likewise). Outcomes are decided from
integer intervals, so a segment's code computes exactly what the unsplit loop computed there.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import sympy
import torch

MAX_SEGMENTS = 6     # more pieces: the unsplit loop (a cat of more inputs is eager's anyway)
# Rows of this many elements or fewer stay whole: each loop costs its own vector prologue and
# tail, and GCC keeps a short masked loop fast (cat of two 64-wide inputs, 4096 rows: 64 us
# split against 55 whole; two 96-wide: 71 against 168; F.pad by 1 of 64: 44 against 38, of
# 96: level, of 256: 38 against 102; thread CPU, one thread).
SPLIT_ABOVE = 128
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


@dataclasses.dataclass(frozen=True)
class Segment:
    """The part [start, end) of the innermost loop `variable`'s range one loop runs."""

    variable: str
    start: int
    end: int


def innermost_segments(boundaries: Callable[[Segment], set], variable: str,
                       size) -> Optional[list]:
    """The segments of `variable`'s range [0, size), or None where the loop stays whole.
    `boundaries(segment)` evaluates the kernel body over `segment` and returns the positions
    where one of its tests changes outcome."""
    if not isinstance(size, (int, sympy.Integer)) or int(size) <= SPLIT_ABOVE:
        return None
    size = int(size)
    points = sorted(point for point in boundaries(Segment(variable, 0, size))
                    if 0 < point < size)
    if not points or len(points) + 1 > MAX_SEGMENTS:
        return None
    edges = [0] + points + [size]
    return [Segment(variable, start, end) for start, end in zip(edges, edges[1:])]


class SegmentFacts:
    """What one segment fixes about a body's values: integer intervals (inclusive) of
    constants and of indices linear in the segment's variable, outcomes of decided tests,
    and (over a whole range) the positions where an undecided test changes outcome."""

    def __init__(self, segment: Segment):
        self.segment = segment
        self.intervals: dict = {}     # value name -> (low, high)
        self.linear: dict = {}        # value name -> (coefficient, offset) of the variable
        self.truth: dict = {}         # value name -> bool
        self.boundaries: set = set()

    def constant(self, name: str, value, dtype) -> None:
        if dtype == torch.bool:
            self.truth[name] = bool(value)
        elif not dtype.is_floating_point and isinstance(value, int):
            self.intervals[name] = (value, value)

    def index(self, name: str, expr) -> None:
        """An integer value `expr` of the loop variables (ops.index_expr)."""
        expr = sympy.expand(sympy.sympify(expr))
        if expr.is_Integer:
            self.intervals[name] = (int(expr), int(expr))
            return
        symbols = expr.free_symbols
        if len(symbols) != 1 or str(next(iter(symbols))) != self.segment.variable:
            return
        symbol = next(iter(symbols))
        coefficient, offset = expr.coeff(symbol), expr.subs(symbol, 0)
        if not (coefficient.is_Integer and offset.is_Integer) or \
                sympy.expand(expr - coefficient * symbol - offset) != 0 or coefficient == 0:
            return
        coefficient, offset = int(coefficient), int(offset)
        ends = (coefficient * self.segment.start + offset,
                coefficient * (self.segment.end - 1) + offset)
        self.intervals[name] = (min(ends), max(ends))
        self.linear[name] = (coefficient, offset)

    def compare(self, operation: str, a: str, b: str) -> Optional[bool]:
        """The outcome of `a <operation> b` over the segment, or None (then its boundaries
        are noted where one side is linear in the variable and the other a constant)."""
        outcome = _decide(operation, self.intervals.get(a), self.intervals.get(b))
        if outcome is None:
            if a in self.linear and _constant(self.intervals.get(b)):
                self._note(operation, self.linear[a], self.intervals[b][0])
            elif b in self.linear and _constant(self.intervals.get(a)):
                self._note(_FLIPPED[operation], self.linear[b], self.intervals[a][0])
        return outcome

    def _note(self, operation: str, line: tuple, bound: int) -> None:
        """Positions where `coefficient * x + offset <operation> bound` changes outcome:
        where the index crosses `bound` (lt, ge) or `bound + 1` (le, gt), or either (eq, ne)."""
        coefficient, offset = line
        thresholds = {"lt": [bound], "ge": [bound], "le": [bound + 1], "gt": [bound + 1]}.get(
            operation, [bound, bound + 1])
        for threshold in thresholds:   # the first x whose `index < threshold` differs
            if coefficient > 0:
                self.boundaries.add(-((offset - threshold) // coefficient))
            else:
                self.boundaries.add((threshold - offset) // coefficient + 1)


def _constant(interval: Optional[tuple]) -> bool:
    return interval is not None and interval[0] == interval[1]


def _decide(operation: str, a: Optional[tuple], b: Optional[tuple]) -> Optional[bool]:
    if a is None or b is None:
        return None
    if operation in ("gt", "ge"):
        return _decide(_FLIPPED[operation], b, a)
    if operation == "ne":
        equal = _decide("eq", a, b)
        return None if equal is None else not equal
    (a_low, a_high), (b_low, b_high) = a, b
    if operation == "lt":
        return True if a_high < b_low else False if a_low >= b_high else None
    if operation == "le":
        return True if a_high <= b_low else False if a_low > b_high else None
    if a_high < b_low or b_high < a_low:     # eq
        return False
    return True if a_low == a_high == b_low == b_high else None
