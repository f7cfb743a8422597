"""The Python wrapper of graphs whose kernels run through Triton.

Input: a `GraphPlan` and one `Launcher` per kernel step. Output: Python source (for people
and logs) and the function compiled from it. It is `codegen/wrapper.py`'s wrapper (buffers
allocated with `empty_strided` on the kernels' device, dead buffers reused, library calls
and fallbacks through ATen, frees at last use) with each kernel step a launcher call, which
runs on the current stream.
"""
from __future__ import annotations

from inductor.codegen.wrapper import WrapperWriter
from inductor.schedule.plans import GraphPlan


class TritonWrapperWriter(WrapperWriter):
    """Writes kernel steps as calls of their launchers."""

    def __init__(self, plan: GraphPlan, launchers: dict, arguments: dict):
        super().__init__(plan, [], [])
        self.launchers = launchers      # step index -> Launcher
        self.arguments = arguments      # step index -> graph buffer names

    def segment_call(self, position: int) -> int:
        step = self.plan.steps[position]
        for name in step.stores:
            if name in self.allocated and name not in self._defined:
                self.allocate(name)
                self._defined.add(name)
        launcher = f"launch{len(self.globals)}"
        self.globals[launcher] = self.launchers[position]
        self.lines.append(f"    {launcher}({', '.join(self.arguments[position])})"
                          f"  # {step.name}")
        return position


def generate(plan: GraphPlan, launchers: dict, arguments: dict):
    """(wrapper source, the `call` function compiled from it)."""
    writer = TritonWrapperWriter(plan, launchers, arguments)
    source = writer.write()
    namespace = dict(writer.globals)
    exec(compile(source, "<framejit triton wrapper>", "exec"), namespace)
    return source, namespace["call"]
