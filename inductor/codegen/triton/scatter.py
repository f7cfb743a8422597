"""The Triton printer of scatter plans: a copy kernel, then a write kernel.

Input: a `ScatterPlan` (tiled "pointwise"). Output: two `@triton.jit` functions over flat
indices: "copy" fills the output from the initial value, "write" stores (or, for
`mode="sum"`, atomically adds) each source value at its computed position. The copy runs to
completion first (the launches are ordered on the stream). Duplicate positions without
accumulation end with one of the written values, as in eager on GPUs.
"""
from __future__ import annotations

import sympy

from inductor.codegen.bounds import is_empty
from inductor.codegen.triton.kernel import TritonKernel
from inductor.codegen.triton.spec import LaunchSpec, product, size_text
from inductor.codegen.triton.expressions import triton_type
from inductor.ir.ops import use_handler
from inductor.ir.symbols import index_symbol


class TritonScatterKernel(TritonKernel):
    """Prints one scatter plan (same interface as `TritonKernel`)."""

    def _launch_spec(self) -> LaunchSpec:
        buffer = self.plan.node.buffer
        return LaunchSpec("scatter", product(buffer.layout.size),
                          rnumel=product(buffer.data.ranges))

    def _functions(self) -> list:
        """Over symbolic sizes, `functions` gives both the size parameters the bodies print
        (the destination's extent, a bound or stride of a buffer the values read)."""
        return [self._function("copy", self._copy, ["XBLOCK"]),
                self._function("write", self._write, ["XBLOCK"])]

    def _flat_loop(self, sizes: list, prefix: str) -> list:
        # loop variables `c0, c1, ...` (copy) and `w0, w1, ...` (write): not named like the
        # graph's sizes (`s0`), which the functions take as parameters
        symbols = [index_symbol(prefix, position) for position in range(len(sizes))]
        self.ranges = dict(zip(symbols, [sympy.sympify(size) for size in sizes]))
        self.add_line(f"xnumel = {size_text(product(sizes))}",
                      f"xoffset = {self._program_offset(0, 'XBLOCK')}",
                      "xindex = xoffset + tl.arange(0, XBLOCK)",
                      "xmask = xindex < xnumel")
        self._decompose("xindex", symbols, sizes, "x")
        self.scope_axes = ("x",)
        return symbols

    def _copy(self):
        buffer = self.plan.node.buffer
        symbols = self._flat_loop(list(buffer.layout.size), "c")
        handler = self._handler()
        with use_handler(handler):
            value = buffer.initial(symbols)
        self.add_line(handler.store_text(buffer.get_name(), buffer.layout.index(symbols), value))

    def _write(self):
        buffer = self.plan.node.buffer
        symbols = self._flat_loop(list(buffer.data.ranges), "w")
        handler = self._handler()
        with use_handler(handler):
            target = buffer.layout.index(buffer.destination(symbols))
            value = buffer.data.inner_fn(symbols)
        if buffer.mode != "sum" or is_empty(buffer.get_name(), self.extents):
            self.add_line(handler.store_text(buffer.get_name(), target, value))
            return
        dtype = self.dtype_of(buffer.get_name())
        text = handler.tensor(value)
        if value.dtype != dtype:
            text = f"{text}.to({triton_type(dtype)})"
        offset = self.index_text(target)
        self.assert_in_bounds(buffer.get_name(), offset, "xmask", "add")
        pointer = handler.address(buffer.get_name(), offset, "xmask", text)
        self.add_line(f"tl.atomic_add({pointer}, {text}, xmask)")
