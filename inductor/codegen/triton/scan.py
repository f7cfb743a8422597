"""The Triton printer of scan plans: each line along the scanned dimension in one block row.

Input: a `ScanPlan` (one `ScanBuffer`, sum or product; `lower/scans.py` keeps other scans
and lines longer than `TRITON_LINE` on eager's kernel). Output: one `@triton.jit` function
launched as a persistent reduction: X lanes are the lines (the dimensions before and after
the scanned one, flattened), the R block is a whole line; the body's values converted to the
accumulation dtype are scanned along R by `tl.associative_scan` (with the prelude's combine
functions: Triton's own `tl.cumsum` is a library `@jit` function the interpreter cannot
run) and stored converted to the buffer's dtype. Lanes past the line's end only follow the
valid ones, so they need no neutral value.
"""
from __future__ import annotations

import sympy

from inductor.codegen.expressions import flat_index
from inductor.codegen.triton.kernel import TritonKernel
from inductor.codegen.triton.spec import LaunchSpec, product, size_text
from inductor.ir.ops import ops, use_handler
from inductor.ir.symbols import index_symbol

SCANS = {"sum": "jit_scan_add", "prod": "jit_scan_mul"}   # combine functions (prelude.py)


class TritonScanKernel(TritonKernel):
    """Prints one scan plan (same interface as `TritonKernel`)."""

    def _shape(self):
        buffer = self.plan.node.buffer
        sizes = list(buffer.layout.size)
        dim = buffer.dim
        return sizes, dim, product(sizes[:dim]), sizes[dim], product(sizes[dim + 1:])

    def _launch_spec(self) -> LaunchSpec:
        _sizes, _dim, outer, length, inner = self._shape()
        return LaunchSpec("reduction", product([outer, inner]), rnumel=int(length),
                          strategy="persistent")

    def _functions(self) -> list:
        return [self._function("main", self._scan, ["XBLOCK", "RBLOCK"])]

    def _scan(self):
        buffer = self.plan.node.buffer
        sizes, dim, outer, length, inner = self._shape()
        row, lane, step = index_symbol("xo", 0), index_symbol("xi", 0), index_symbol("r", 0)
        self.ranges = {row: sympy.sympify(outer), lane: sympy.sympify(inner),
                       step: sympy.sympify(length)}
        offset = self._program_offset(0, "XBLOCK")
        self.add_line(f"xnumel = {size_text(product([outer, inner]))}",
                      f"xindex = {offset} + tl.arange(0, XBLOCK)[:, None]",
                      "xmask = xindex < xnumel")
        self._decompose("xindex", [row, lane], [outer, inner], "x")
        base = "tl.arange(0, RBLOCK)[None, :]"
        if self.tiling.index_bits == 64:
            base += ".to(tl.int64)"
        self.add_line(f"rnumel = {size_text(length)}", f"rindex = {base}",
                      "rmask = rindex < rnumel")
        self._decompose("rindex", [step], [length], "r")
        self.scope_axes = ("x", "r")
        index = flat_index(row, sizes[:dim]) + [step] + flat_index(lane, sizes[dim + 1:])
        handler = self._handler()
        with use_handler(handler):
            value = ops.to_dtype(buffer.data.inner_fn(index), buffer.acc_dtype)
            name = f"{handler.prefix}scan"
            # a value constant along the line (a literal, a row's value) is a scalar or a
            # [XBLOCK, 1] block: scanned as is, sm_90 rejects axis 1 of a scalar and a
            # size-1 axis scans to the value itself; spread over the whole block first
            # (always: a no-op on a whole block)
            text = f"tl.broadcast_to({handler.tensor(value)}, [XBLOCK, RBLOCK])"
            self.add_line(f"{name} = tl.associative_scan({text}, 1, "
                          f"{SCANS[buffer.scan_type]})")
            result = handler.value_type(name, buffer.acc_dtype)
            self.value_axes[name] = frozenset({"x", "r"})
            if buffer.get_dtype() != buffer.acc_dtype:
                result = ops.to_dtype(result, buffer.get_dtype())
            store = handler.store_text(buffer.get_name(), buffer.layout.index(index), result)
        # one line only (its index has no X part): the handler spreads the pointer over X
        # lanes of a one-dimensional block; here blocks are [XBLOCK, RBLOCK]
        self.add_line(store.replace(", [XBLOCK])", ", [XBLOCK, RBLOCK])"))
