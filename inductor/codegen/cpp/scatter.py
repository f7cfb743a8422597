"""The C++ printer of scatter plans: copy the input, then store (or add) each source value at
its computed position.

Input: a `ScatterPlan`. Output: one static C++ function. The copy runs over the output in
parallel; the writes run sequentially in source order, which makes duplicate positions end as
eager leaves them (the last write wins, or every value is added).
"""
from __future__ import annotations


import sympy

from inductor.codegen.cpp.expressions import index_text
from inductor.codegen.cpp.kernel import _LineSink
from inductor.codegen.cpp.plan_kernel import PlanKernel
from inductor.codegen.cpp.ops import CppOpsHandler
from inductor.config import config
from inductor.ir.ops import ops, use_handler
from inductor.ir.symbols import index_symbol, simplify_index, size_hint


class CppScatterKernel(PlanKernel):
    """Prints one scatter plan (same interface as `CppKernel`)."""

    def _body(self, buffer) -> None:
        self._copy(buffer)
        self._writes(buffer)

    def _handler(self, prefix: str, ranges: dict) -> CppOpsHandler:
        def index(expr):
            return index_text(simplify_index(sympy.expand(sympy.sympify(expr)), ranges))
        return CppOpsHandler(_LineSink(self.lines), self.dtype_of, lambda name, idx: None,
                             index, prefix=prefix, pointer=self.pointers.__getitem__,
                             extents=self.extents, site=self.plan.name,
                             check_bounds=config.bounds_check)

    def _loops(self, sizes: list, prefix: str, parallel: bool) -> list:
        symbols = [index_symbol(prefix, position) for position in range(len(sizes))]
        work = 1
        for size in sizes:
            work *= size_hint(size)     # a heuristic: symbolic sizes at their example values
        for position, (symbol, size) in enumerate(zip(symbols, sizes)):
            if parallel and position == 0 and work >= self.threshold and self.threads > 1:
                clause = f" num_threads({self.threads})" if config.threads > 0 else ""
                self.lines.add(f"#pragma omp parallel for{clause}")
            elif parallel and position == len(sizes) - 1 and self.vectorize:
                self.lines.add("#pragma omp simd")
            self.lines.open(f"for (int64_t {symbol.name} = 0; {symbol.name} < "
                            f"{index_text(sympy.sympify(size))}; "
                            f"++{symbol.name})")
        return symbols

    def _copy(self, buffer) -> None:
        if getattr(self.plan, "copy_in_place", False):
            return      # the buffer holds what the copy would write (schedule/in_place.py)
        sizes = list(buffer.layout.size)
        symbols = self._loops(sizes, "x", parallel=True)
        ranges = dict(zip(symbols, sizes))
        handler = self._handler("c", ranges)
        with use_handler(handler):
            value = buffer.initial(symbols)
            self.lines.add(handler.store_text(buffer.get_name(), buffer.layout.index(symbols),
                                              value))
        for _ in symbols:
            self.lines.close()

    def _writes(self, buffer) -> None:
        sizes = list(buffer.data.ranges)
        symbols = self._loops(sizes, "y", parallel=False)
        ranges = dict(zip(symbols, sizes))
        handler = self._handler("w", ranges)
        with use_handler(handler):
            target = buffer.layout.index(buffer.destination(symbols))
            value = buffer.data.inner_fn(symbols)
            if buffer.mode == "sum":
                value = ops.add(handler.load(buffer.get_name(), target), value)
            self.lines.add(handler.store_text(buffer.get_name(), target, value))
        for _ in symbols:
            self.lines.close()
