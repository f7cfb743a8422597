"""Scheduler nodes: each buffer of the loop IR with its iteration space and memory accesses.

Input: a `LoopGraph` buffer. Output: a `SchedulerNode`: the loop sizes (outer, and inner for
reductions) after dropping size-1 loops, ordering loops by the output's strides and merging
loops every access walks contiguously; the reads and the write as index expressions over the
node's own loop variables (`i0..` outer, `r0..` reduction); which buffers it depends on.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import sympy

from inductor.ir.nodes import (Buffer, ComputedBuffer, ExternKernel, MultiOutput, Reduction,
                               ReinterpretView, ScanBuffer, ScatterBuffer)
from inductor.ir.ops import OpsHandler, use_handler
from inductor.ir.symbols import (FloorDiv, ModularIndexing, index_symbol, is_size,
                                 linear_coefficient, product, simplify_index, size_hint,
                                 substitute, to_expr)


@dataclasses.dataclass
class Access:
    """A read or write of `name` at `index` (None: some unknown element, e.g. indirect)."""

    name: str
    index: Optional[sympy.Expr]


class AccessRecorder(OpsHandler):
    """Runs a body to collect loads and index expressions; values are placeholders."""

    def __init__(self):
        self.reads: list[Access] = []
        self.index_expressions: list = []
        self.indirect = 0

    def load(self, name, index):
        is_indirect = any(symbol.name.startswith("t") for symbol in index.free_symbols)
        self.reads.append(Access(name, None if is_indirect else index))
        if not is_indirect:
            self.index_expressions.append(index)
        return "value"

    def index_expr(self, expr, dtype):
        self.index_expressions.append(expr)
        return "value"

    def indirect_indexing(self, value, size, check=True):
        symbol = sympy.Symbol(f"t{self.indirect}", integer=True)
        self.indirect += 1
        return symbol

    def masked(self, mask, body, other):
        return body()

    def default(self, name, *args, **kwargs):
        return "value"


class SchedulerNode:
    """One buffer to compute: a loop body (or an extern call) and its dependencies."""

    def __init__(self, buffer: Buffer):
        self.buffer = buffer
        self.name = buffer.get_name()
        self.users: list["SchedulerNode"] = []
        self.order = 0  # position in the topological order
        self.outer_sizes: list[int] = []
        self.inner_sizes: list[int] = []
        self.outer_index: list = []   # IR outer index in terms of the node's loop variables
        self.inner_index: list = []
        self.reads: list[Access] = []
        self.write: Optional[Access] = None
        self.index_expressions: list = []
        if isinstance(buffer, ScatterBuffer):
            self._analyse_scatter()
        elif isinstance(buffer, ScanBuffer):
            self._analyse_scan()
        elif isinstance(buffer, ComputedBuffer):
            self._analyse_loops()
        else:
            self.reads = [Access(_base_name(value), None) for value in
                          getattr(buffer, "inputs", [])]
            if isinstance(buffer, MultiOutput):
                self.reads = [Access(buffer.parent.get_name(), None)]
            self.write = Access(self.name, None)

    # -- kinds ---------------------------------------------------------------------------
    def is_extern(self) -> bool:
        return isinstance(self.buffer, (ExternKernel, MultiOutput))

    def is_reduction(self) -> bool:
        return isinstance(self.buffer, ComputedBuffer) and self.buffer.is_reduction()

    def is_scatter(self) -> bool:
        return isinstance(self.buffer, ScatterBuffer)

    def is_scan(self) -> bool:
        return isinstance(self.buffer, ScanBuffer)

    def own_kernel(self) -> bool:
        """Whether the node runs as a kernel of its own, never fused (scatters, scans)."""
        return self.is_scatter() or self.is_scan()

    def written_name(self) -> str:
        """The memory written: the buffer, or the graph input an in-place update targets."""
        mutated = getattr(self.buffer, "mutated_input", None)
        return mutated or self.name

    def read_names(self) -> set:
        return {access.name for access in self.reads}

    def numel(self) -> int:
        return _product(self.outer_sizes)

    def rnumel(self) -> int:
        return _product(self.inner_sizes)

    # -- loops ---------------------------------------------------------------------------
    def _analyse_loops(self) -> None:
        data = self.buffer.data
        outer = [extent_of(size) for size in data.ranges]
        inner = [extent_of(size) for size in getattr(data, "reduction_ranges", [])]
        outer_vars = [index_symbol("i", n) for n in range(len(outer))]
        inner_vars = [index_symbol("r", n) for n in range(len(inner))]
        write = self.buffer.layout.index(outer_vars)
        reads, expressions = self._record(outer_vars, inner_vars)
        order = _order_by_strides(write, outer_vars, outer)
        outer_plan = _merge_plan([outer[n] for n in order], [outer_vars[n] for n in order],
                                 expressions + [write], "i")
        inner_order = _order_by_strides(_main_read(reads, inner_vars), inner_vars, inner) \
            if inner else []
        inner_plan = _merge_plan([inner[n] for n in inner_order],
                                 [inner_vars[n] for n in inner_order], expressions, "r")
        self.outer_sizes, outer_map = outer_plan
        self.inner_sizes, inner_map = inner_plan
        replacements = {**outer_map, **inner_map}
        self.outer_index = [replacements.get(symbol, symbol) for symbol in outer_vars]
        self.inner_index = [replacements.get(symbol, symbol) for symbol in inner_vars]
        ranges = self.variable_ranges()
        self.reads = [Access(access.name, None if access.index is None else
                             simplify_index(substitute(access.index, replacements), ranges))
                      for access in reads]
        self.write = Access(self.written_name(),
                            simplify_index(substitute(write, replacements), ranges))
        self.index_expressions = [simplify_index(substitute(expr, replacements), ranges)
                                  for expr in expressions]

    def _analyse_scatter(self) -> None:
        """A scatter runs as its own kernel: record what it reads; it writes anywhere."""
        buffer = self.buffer
        recorder = AccessRecorder()
        output_vars = [index_symbol("i", n) for n in range(len(buffer.layout.size))]
        source_vars = [index_symbol("r", n) for n in range(len(buffer.data.ranges))]
        with use_handler(recorder):
            buffer.initial(output_vars)
            buffer.destination(source_vars)
            buffer.data.inner_fn(source_vars)
        self.reads = [Access(access.name, None) for access in recorder.reads]
        self.write = Access(self.name, None)
        self.outer_sizes = [extent_of(size) for size in buffer.layout.size]

    def _analyse_scan(self) -> None:
        """A scan runs as its own kernel (its body, producers included, inlined): record
        what it reads; it writes its whole buffer."""
        buffer = self.buffer
        recorder = AccessRecorder()
        with use_handler(recorder):
            buffer.data.inner_fn([index_symbol("i", n) for n in range(len(buffer.layout.size))])
        self.reads = [Access(access.name, None) for access in recorder.reads]
        self.write = Access(self.name, None)
        self.outer_sizes = [extent_of(size) for size in buffer.layout.size]

    def _record(self, outer_vars, inner_vars):
        recorder = AccessRecorder()
        data = self.buffer.data
        with use_handler(recorder):
            if isinstance(data, Reduction):
                data.inner_fn(outer_vars, inner_vars)
            else:
                data.inner_fn(outer_vars)
        return recorder.reads, recorder.index_expressions

    def variable_ranges(self) -> dict:
        """Loop variable -> extent, for this node's own (merged) loops."""
        ranges = {index_symbol("i", n): to_expr(size)
                  for n, size in enumerate(self.outer_sizes)}
        ranges.update({index_symbol("r", n): to_expr(size)
                       for n, size in enumerate(self.inner_sizes)})
        return ranges

    def __repr__(self) -> str:
        return f"SchedulerNode({self.name}, outer={self.outer_sizes}, inner={self.inner_sizes})"


def _base_name(value) -> str:
    return value.data.get_name() if isinstance(value, ReinterpretView) else value.get_name()


def extent_of(size):
    """A loop extent: an int where static (as before symbolic sizes), else an expression."""
    size = to_expr(size)
    return int(size) if size.is_Integer else size


def _product(sizes):
    """The product of sizes: an int where all are static, else a sympy expression."""
    result = product(sizes)
    return int(result) if result.is_Integer else result


def _main_read(reads: list[Access], inner_vars: list):
    """The read whose index involves the most reduction variables (decides loop order)."""
    best, best_count = sympy.Integer(0), -1
    for access in reads:
        if access.index is None:
            continue
        count = len(access.index.free_symbols & set(inner_vars))
        if count > best_count:
            best, best_count = access.index, count
    return best


def _order_by_strides(expression, variables: list, sizes: list) -> list[int]:
    """Loop positions, outermost first, so the innermost loop has the smallest stride in
    `expression`; ties (and any non-linear use) keep the IR order."""
    keys = []
    for position, symbol in enumerate(variables):
        coefficient = linear_coefficient(expression, symbol)
        if coefficient is None or not (coefficient.is_Integer or is_size(coefficient)):
            return list(range(len(variables)))
        # a heuristic: symbolic strides order by their example values
        keys.append(0 if sizes[position] == 1 else size_hint(coefficient))
    return sorted(range(len(variables)), key=lambda position: (-keys[position], position))


def _mergeable(expressions, outer_symbol, inner_symbol, inner_size) -> bool:
    for expr in expressions:
        outer = linear_coefficient(expr, outer_symbol)
        inner = linear_coefficient(expr, inner_symbol)
        if outer is None or inner is None:
            return False
        if outer != inner * inner_size:
            return False
    return True


def _merge_plan(sizes: list[int], symbols: list, expressions: list, prefix: str):
    """Drop size-1 loops and merge neighbours every expression walks contiguously.

    Returns the new sizes and a map from each original symbol to an expression in the new
    loop variables `prefix0, prefix1, ...`.
    """
    if any(size == 0 for size in sizes):
        # No element at all: one empty loop (the kernel runs nothing; the buffer is allocated).
        return [0], {symbol: sympy.Integer(0) for symbol in symbols}
    replacements = {}
    kept_sizes, kept_symbols = [], []
    for size, symbol in zip(sizes, symbols):
        if size == 1:
            replacements[symbol] = sympy.Integer(0)
        else:
            kept_sizes.append(size)
            kept_symbols.append(symbol)
    groups = []  # each: list of (size, symbol), outermost first
    for size, symbol in zip(kept_sizes, kept_symbols):
        if groups:
            last_size, last_symbol = groups[-1][-1]
            reduced = [substitute(expr, replacements) for expr in expressions]
            if _mergeable(reduced, last_symbol, symbol, size):
                groups[-1].append((size, symbol))
                continue
        groups.append([(size, symbol)])
    new_sizes = []
    for position, group in enumerate(groups):
        new_symbol = index_symbol(prefix, position)
        extent = _product(size for size, _symbol in group)
        for member, (size, symbol) in enumerate(group):
            stride = _product(inner for inner, _symbol in group[member + 1:])
            value = new_symbol if len(group) == 1 else _piece(new_symbol, stride, size, extent)
            replacements[symbol] = value
        new_sizes.append(extent)
    return new_sizes, replacements


def member_is_outermost(stride, size, extent) -> bool:
    """Whether `stride * size` is the whole merged `extent` (for every size)."""
    return sympy.expand(to_expr(stride) * to_expr(size) - to_expr(extent)) == 0


def _piece(symbol, stride, size, extent):
    if member_is_outermost(stride, size, extent):
        return FloorDiv(symbol, stride)
    return ModularIndexing(symbol, stride, size)
