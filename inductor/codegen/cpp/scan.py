"""The C++ printer of scan plans: each line along the scanned dimension accumulated in order.

Input: a `ScanPlan` (one `ScanBuffer`). Output: one static C++ function. The buffer is seen
as `outer x length x inner` (the dimensions before the scanned one, the scanned one, those
after it). Where `inner` is 1 (the scan runs along the innermost dimension) each line is a
sequential loop, `ROWS` lines interleaved, and groups of lines are split over threads.
Otherwise `inner` is cut into blocks of `BLOCK` neighbouring lines whose accumulators sit in
an array: each step along the scanned dimension updates the block in a `#pragma omp simd`
loop, and the (outer, block) pairs are split over threads. Every element is accumulated in
the plan's `acc_dtype` in line order and converted when stored, as eager's CPU kernels do,
so results are the same bits.
"""
from __future__ import annotations


import sympy

from inductor.codegen.cpp.expressions import index_text, literal, storage_type
from inductor.codegen.cpp.kernel import _LineSink
from inductor.codegen.cpp.plan_kernel import PlanKernel
from inductor.codegen.expressions import flat_index
from inductor.codegen.cpp.ops import CppOpsHandler
from inductor.config import config
from inductor.ir.ops import ops, use_handler
from inductor.ir.symbols import index_symbol, product, simplify_index, size_hint

BLOCK = 32   # neighbouring lines scanned together where the scanned dimension is not innermost
ROWS = 8     # lines along the innermost dimension interleaved
INITIAL = {"sum": 0, "prod": 1, "logsumexp": float("-inf")}


class CppScanKernel(PlanKernel):
    """Prints one scan plan (same interface as `CppKernel`)."""

    def _body(self, buffer) -> None:
        self._scan(buffer)

    def _parallel(self, work) -> None:
        if self.threads > 1 and size_hint(work) >= self.threshold:
            clause = f" num_threads({self.threads})" if config.threads > 0 else ""
            self.lines.add(f"#pragma omp parallel for{clause} schedule(static)")

    def _scan(self, buffer) -> None:
        sizes = list(buffer.layout.size)
        dim = buffer.dim
        outer, length, inner = product(sizes[:dim]), sizes[dim], product(sizes[dim + 1:])
        row, step, lane = (index_symbol("x", n) for n in range(3))
        acc = storage_type(buffer.acc_dtype)
        initial = literal(INITIAL[buffer.scan_type], buffer.acc_dtype)
        blocked = not (sympy.sympify(inner).is_Integer and int(inner) == 1)
        if not blocked:
            self._lines_along_innermost(buffer, outer, length, acc, initial)
            return
        blocks = f"(({index_text(inner)} + {BLOCK - 1}) / {BLOCK})"
        self._parallel(product(sizes))
        self.lines.open(f"for (int64_t q = 0; q < {index_text(outer)} * {blocks}; ++q)")
        self.lines.add(f"const int64_t {row} = q / {blocks};",
                       f"const int64_t start = (q % {blocks}) * {BLOCK};",
                       f"const int64_t count = {index_text(inner)} - start < {BLOCK} ? "
                       f"{index_text(inner)} - start : {BLOCK};",
                       f"{acc} acc[{BLOCK}];",
                       f"for (int64_t k = 0; k < {BLOCK}; ++k) acc[k] = {initial};")
        self._step_loop(buffer, step, length)
        if self.vectorize:
            self.lines.add("#pragma omp simd")
        self.lines.open("for (int64_t k = 0; k < count; ++k)")
        self.lines.add(f"const int64_t {lane} = start + k;")
        self._element(buffer, [row, step, lane], [outer, length, inner], "k")
        for _ in range(3):
            self.lines.close()

    def _lines_along_innermost(self, buffer, outer, length, acc: str, initial: str) -> None:
        """Lines along the innermost dimension, `ROWS` at a time: each line's additions
        wait for the previous one, so interleaving lines hides that latency (a line's
        order stays its own)."""
        row, step = index_symbol("x", 0), index_symbol("x", 1)
        groups = f"(({index_text(outer)} + {ROWS - 1}) / {ROWS})"
        self._parallel(product(buffer.layout.size))
        self.lines.open(f"for (int64_t q = 0; q < {groups}; ++q)")
        self.lines.add(f"const int64_t first = q * {ROWS};",
                       f"const int64_t count = {index_text(outer)} - first < {ROWS} ? "
                       f"{index_text(outer)} - first : {ROWS};",
                       f"{acc} acc[{ROWS}];",
                       f"for (int64_t k = 0; k < {ROWS}; ++k) acc[k] = {initial};")
        self._step_loop(buffer, step, length)
        for condition, bound in ((f"if (count == {ROWS})", str(ROWS)), ("else", "count")):
            self.lines.open(condition)
            self.lines.open(f"for (int64_t k = 0; k < {bound}; ++k)")
            self.lines.add(f"const int64_t {row} = first + k;")
            self._element(buffer, [row, step, sympy.Integer(0)], [outer, length, 1], "k")
            self.lines.close()
            self.lines.close()
        self.lines.close()
        self.lines.close()

    def _step_loop(self, buffer, step, length) -> None:
        self.lines.open(f"for (int64_t {step} = 0; {step} < {index_text(length)}; ++{step})")

    def _element(self, buffer, symbols: list, extents: list, slot: str) -> None:
        """One element: load the body's value, combine it into `acc[slot]`, store."""
        sizes = list(buffer.layout.size)
        dim = buffer.dim
        row, step, lane = symbols
        index = flat_index(row, sizes[:dim]) + [step] + flat_index(lane, sizes[dim + 1:])
        ranges = {symbol: sympy.sympify(extent) for symbol, extent in zip(symbols, extents)
                  if isinstance(symbol, sympy.Symbol)}

        def print_index(expr):
            return index_text(simplify_index(sympy.expand(sympy.sympify(expr)), ranges))
        handler = CppOpsHandler(_LineSink(self.lines), self.dtype_of, lambda name, idx: None,
                                print_index, prefix="t", pointer=self.pointers.__getitem__,
                                extents=self.extents, site=self.plan.name,
                                check_bounds=config.bounds_check)
        with use_handler(handler):
            value = ops.to_dtype(buffer.data.inner_fn(index), buffer.acc_dtype)
            running = f"acc[{slot}]"
            text = {"sum": f"{running} + {value.name}", "prod": f"{running} * {value.name}",
                    "logsumexp": f"jit_log_add_exp({value.name}, {running})"}[buffer.scan_type]
            combined = handler.emit(text, buffer.acc_dtype)
            self.lines.add(f"{running} = {combined.name};")
            result = combined
            if buffer.get_dtype() != buffer.acc_dtype:
                result = ops.to_dtype(result, buffer.get_dtype())
            self.lines.add(handler.store_text(buffer.get_name(), buffer.layout.index(index),
                                              result))
