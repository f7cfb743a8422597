"""What the C++ printers of one-buffer plans share (scatter, scan): the pointers to the plan's
loads and stores, and the function around the body each writes.

Input: a plan with `loads`, `stores`, `name` and `node.buffer`. Output: one static C++ function
(`source`): a pointer per buffer (`const` where only read), then one `int64_t` per size symbol
the body prints, then the body the subclass writes into `lines` (`_body`).
"""
from __future__ import annotations

import re
from typing import Optional

import sympy

from inductor.codegen.cpp.expressions import storage_type
from inductor.codegen.cpp.lines import Lines


class PlanKernel:
    """The printer of one plan over one buffer (same interface as `CppKernel`)."""

    def __init__(self, plan, dtype_of, threads: int, threshold: int, vectorize: bool = True):
        self.plan = plan
        self.dtype_of = dtype_of
        self.threads = threads
        self.threshold = threshold
        self.vectorize = vectorize
        self.lines = Lines()
        self.pointers = {name: f"p{position}" for position, name in enumerate(self.arguments())}
        self.extents: Optional[dict] = None   # buffer -> elements it spans (bounds.py)
        self.size_symbols: list = []          # set by `source`: the size symbols it prints

    def arguments(self) -> list[str]:
        return list(self.plan.loads) + [name for name in self.plan.stores
                                        if name not in self.plan.loads]

    def source(self, function_name: Optional[str] = None) -> str:
        stored = set(self.plan.stores)
        parameters = [f"{'' if name in stored else 'const '}{storage_type(self.dtype_of(name))}* "
                      f"__restrict__ {self.pointers[name]}" for name in self.arguments()]
        self._body(self.plan.node.buffer)
        body = self.lines.function_lines()
        # over symbolic sizes: one int64 per size symbol printed, after the pointers
        self.size_symbols = [sympy.Symbol(name, integer=True, positive=True) for name in
                             sorted(set(re.findall(r"\bs\d+\b", "\n".join(body))))]
        parameters += [f"const int64_t {symbol.name}" for symbol in self.size_symbols]
        head = f"static void {function_name or self.plan.name}({', '.join(parameters)}) {{"
        return "\n".join([head] + body + ["}"])

    def _body(self, buffer) -> None:
        """Write the function's body into `self.lines`."""
        raise NotImplementedError
