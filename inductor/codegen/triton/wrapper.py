"""The Python wrapper of graphs whose kernels run through Triton.

Input: a `GraphPlan` and one `Launcher` per kernel step. Output: Python source (for people
and logs) and the function compiled from it. It is `codegen/wrapper.py`'s wrapper (buffers
allocated with `empty_strided` on the kernels' device, dead buffers reused, library calls
and fallbacks through ATen, frees at last use) with each kernel step a launcher call, which
runs on the current stream. A 0-d CPU buffer a kernel reads (eager reads one beside GPU
tensors as a scalar) is copied to the GPU before its first launch. A kernel over symbolic
sizes also takes the values of its size symbols after its buffers; the wrapper binds them
from the inputs at the top of each call (`s0 = arg0.shape[0]`, the symbolic-plan
contract).
"""
from __future__ import annotations

from typing import Optional

from inductor.codegen.devices import host_scalar_argument
from inductor.codegen.wrapper import WrapperWriter
from inductor.schedule.plans import GraphPlan


class TritonWrapperWriter(WrapperWriter):
    """Writes kernel steps as calls of their launchers."""

    def __init__(self, plan: GraphPlan, launchers: dict, arguments: dict,
                 sizes: Optional[dict] = None):
        super().__init__(plan, [], [])
        self.launchers = launchers      # step index -> Launcher
        self.arguments = arguments      # step index -> graph buffer names
        self.size_arguments = sizes or {}   # step index -> size symbol names it takes
        self._copied: set = set()       # 0-d CPU buffers copied to the device (`_on_device`)

    def _write_body(self) -> str:
        self._copied = set()            # each pass (`WrapperWriter.write`) copies afresh
        return super()._write_body()

    def segment_call(self, position: int) -> int:
        step = self.plan.steps[position]
        for name in step.stores:
            if name in self.allocated and name not in self._defined:
                self.allocate(name)
                self._defined.add(name)
        launcher = f"launch{len(self.globals)}"
        self.globals[launcher] = self.launchers[position]
        kernel = self.launchers[position]
        dispatch = getattr(kernel, "dispatch", None)
        if dispatch is not None:    # a kernel over symbolic sizes: its generated dispatch,
            launcher += "_dispatch"     # called straight (`__call__` was a frame more)
            self.globals[launcher] = dispatch
        sizes = self.size_arguments.get(position) or getattr(kernel, "size_names", ())
        names = [self._on_device(name, kernel.device)
                 for name in self.arguments[position]] + list(sizes)
        self.lines.append(f"    {launcher}({', '.join(names)})  # {step.name}")
        return position

    def _on_device(self, name: str, device) -> str:
        """The name a kernel takes `name` by: a copy on `device` of a 0-d CPU buffer
        (`devices.host_scalar_argument`), made at its first launch."""
        layout = getattr(self.plan.buffers.get(name), "layout", None)
        if layout is None or not host_scalar_argument(layout, device):
            return name
        if name not in self._copied:
            target = f"device{len(self.globals)}"
            self.globals[target] = device
            self.lines.append(f"    {name}_on_device = {name}.to({target})")
            self._copied.add(name)
        return f"{name}_on_device"


def generate(plan: GraphPlan, launchers: dict, arguments: dict, sizes: Optional[dict] = None):
    """(wrapper source, the `call` function compiled from it); `sizes`: step index -> the
    size symbols its kernel takes after its buffers."""
    writer = TritonWrapperWriter(plan, launchers, arguments, sizes)
    source = writer.write()
    namespace = dict(writer.globals)
    exec(compile(source, "<framejit triton wrapper>", "exec"), namespace)
    return source, namespace["call"]
