"""The Python wrapper: the function a compiled graph runs per call.

Input: a `GraphPlan`, its C++ segments and their loaded entry points. Output: Python source
(kept for people and logs) and the function compiled from it, which allocates buffers with
`empty_strided` (reusing a dead buffer of the same byte size when one exists), calls each
segment's entry point with data pointers, calls library kernels and eager fallbacks through
ATen, frees each buffer after its last reader, and returns the outputs.
"""
from __future__ import annotations

import math
import torch

from inductor.ir.nodes import (Buffer, ConstantBuffer, MultiOutput, ReinterpretView,
                               TensorArgument)
from inductor.schedule.plans import ExternStep, GraphPlan, KernelPlan


class KernelError:
    """Raises what eager raises for an error a kernel reported."""

    @staticmethod
    def raise_for(status: int):
        if status == 1:
            raise RuntimeError("ZeroDivisionError")
        if status == 2:
            raise IndexError("index out of range in a compiled kernel (gather, index or "
                             "embedding with an index outside the tensor)")
        raise RuntimeError(f"compiled kernel failed with status {status}")


def _restride(value: torch.Tensor, size, stride) -> torch.Tensor:
    result = torch.empty_strided(size, stride, dtype=value.dtype, device=value.device)
    return result.copy_(value)


def _nbytes(layout) -> int:
    return int(layout.storage_size()) * torch.empty((), dtype=layout.dtype).element_size()


def _viewed_by_library_calls(plan: GraphPlan) -> set:
    """Buffers passed to an eager op that may return a view of its input (its schema says
    so): the view outlives the buffer's last use, so its memory is never handed on."""
    viewed = set()
    for step in plan.steps:
        buffer = getattr(getattr(step, "node", None), "buffer", None)
        schema = getattr(getattr(buffer, "kernel", None), "_schema", None)
        if schema is None or not isinstance(step, ExternStep):
            continue
        if any(result.alias_info is not None for result in schema.returns):
            viewed |= step.node.read_names()
    return viewed


class WrapperWriter:
    """Builds the wrapper's source line by line (see the module docstring)."""

    def __init__(self, plan: GraphPlan, segments: list, entries: list):
        self.plan = plan
        self.segments = {segment.first_step: (segment, entry)
                         for segment, entry in zip(segments, entries)}
        self.lines: list[str] = []
        self.globals: dict = {"torch": torch, "empty_strided": torch.empty_strided,
                              "as_strided": torch.as_strided, "kernel_error": KernelError.raise_for,
                              "restride": _restride, "device": torch.device,
                              "inf": math.inf, "nan": math.nan}
        self.pool: list = []        # (nbytes, dtype, device, name) of dead buffers
        self.allocated = set(plan.allocated)
        self.viewed = _viewed_by_library_calls(plan)
        self.inputs = {buffer.get_name() for buffer in plan.inputs}
        for name, buffer in plan.buffers.items():
            if isinstance(buffer, ConstantBuffer):
                self.globals[name] = buffer.value
                self.inputs.add(name)

    # -- helpers -----------------------------------------------------------------------
    def constant(self, value) -> str:
        """A Python expression for a constant argument (simple ones inline)."""
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else \
                ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.device):
            return f"device({str(value)!r})"
        if isinstance(value, (list, tuple)):
            items = [self.constant(item) for item in value]
            text = ", ".join(items) + ("," if isinstance(value, tuple) and len(items) == 1
                                       else "")
            return f"[{text}]" if isinstance(value, list) else f"({text})"
        name = f"constant{len(self.globals)}"
        self.globals[name] = value
        return name

    def reference(self, value) -> str:
        """A Python expression for a buffer or strided view of one."""
        if isinstance(value, ReinterpretView):
            base = value.data.get_name()
            layout = value.layout
            offset = int(layout.offset)
            offset_text = f"{base}.storage_offset() + {offset}" if base in self.inputs \
                else str(offset)
            return (f"as_strided({base}, {self.constant(tuple(int(s) for s in layout.size))}, "
                    f"{self.constant(tuple(int(s) for s in layout.stride))}, {offset_text})")
        return value.get_name()

    def argument(self, value, inputs) -> str:
        if isinstance(value, TensorArgument):
            return self.reference(inputs[value.position])
        if isinstance(value, (list, tuple)) and any(isinstance(item, TensorArgument)
                                                     for item in value):
            items = ", ".join(self.argument(item, inputs) for item in value)
            return f"[{items}]"
        return self.constant(value)

    # -- steps -------------------------------------------------------------------------
    def allocate(self, name: str) -> None:
        buffer = self.plan.buffers[name]
        layout = buffer.layout
        size = self.constant(tuple(int(s) for s in layout.size))
        stride = self.constant(tuple(int(s) for s in layout.stride))
        nbytes = _nbytes(layout)
        for position, (free_bytes, dtype, device, free_name) in enumerate(self.pool):
            if free_bytes == nbytes and dtype == layout.dtype and device == layout.device:
                del self.pool[position]
                self.lines.append(f"    {name} = as_strided({free_name}, {size}, {stride}, 0)")
                self.lines.append(f"    del {free_name}")
                return
        dtype = self.constant(layout.dtype)
        device = "" if layout.device.type == "cpu" else \
            f", device={self.constant(layout.device)}"
        self.lines.append(f"    {name} = empty_strided({size}, {stride}, dtype={dtype}{device})")

    def free(self, names) -> None:
        for name in names:
            buffer = self.plan.buffers.get(name)
            if name in self.allocated and name not in self.viewed and \
                    isinstance(buffer, Buffer) and buffer.layout:
                self.pool.append((_nbytes(buffer.layout), buffer.layout.dtype,
                                  buffer.layout.device, name))
            else:
                self.lines.append(f"    del {name}")

    def segment_call(self, position: int) -> int:
        """Emit one segment; return the index of its last step."""
        segment, entry = self.segments[position]
        entry_name = f"entry{len(self.globals)}"
        self.globals[entry_name] = entry
        kernel_names = set(segment.kernels)
        steps = [step for step in self.plan.steps[position:]
                 if isinstance(step, KernelPlan) and step.name in kernel_names]
        for step in steps:
            for name in step.stores:
                if name in self.allocated and name not in self._defined:
                    self.allocate(name)
                    self._defined.add(name)
        pointers = ", ".join(f"{name}.data_ptr()" for name in segment.arguments)
        self.lines.append(f"    status = {entry_name}({pointers})")
        self.lines.append("    if status:")
        self.lines.append("        kernel_error(status)")
        return position + len(steps) - 1

    def extern_call(self, step: ExternStep) -> None:
        buffer = step.node.buffer
        name = buffer.get_name()
        if isinstance(buffer, MultiOutput):
            path = "".join(f"[{index}]" for index in buffer.path)
            self.lines.append(f"    {name} = {buffer.parent.get_name()}{path}")
        else:
            kernel = f"extern{len(self.globals)}"
            self.globals[kernel] = buffer.kernel
            args, kwargs = buffer.arguments
            parts = [self.argument(value, buffer.inputs) for value in args]
            parts += [f"{key}={self.argument(value, buffer.inputs)}"
                      for key, value in kwargs.items()]
            self.lines.append(f"    {name} = {kernel}({', '.join(parts)})")
        if buffer.layout is not None:
            stride = self.constant(tuple(int(s) for s in buffer.layout.stride))
            size = self.constant(tuple(int(s) for s in buffer.layout.size))
            # Only dimensions longer than one have a stride that addresses anything.
            dims = [dim for dim, extent in enumerate(buffer.layout.size) if int(extent) > 1]
            if dims:
                actual = f"{name}.stride()"
                checks = " or ".join(f"{actual}[{dim}] != {int(buffer.layout.stride[dim])}"
                                     for dim in dims) if len(dims) <= 4 else \
                    f"{actual} != {stride}"
                self.lines.append(f"    if {checks}:")
                self.lines.append(f"        {name} = restride({name}, {size}, {stride})")

    def _outputs(self) -> list:
        """Output expressions; a buffer returned twice comes back as two tensor objects (eager's
        `detach` or `alias` outputs are distinct objects over one storage)."""
        texts, seen = [], set()
        for value in self.plan.outputs:
            text = self.output(value)
            if text in seen and isinstance(value, Buffer) and value.layout is not None:
                layout = value.layout
                text = (f"as_strided({text}, {self.constant(tuple(int(s) for s in layout.size))}"
                        f", {self.constant(tuple(int(s) for s in layout.stride))}, "
                        f"{text}.storage_offset())")
            seen.add(text)
            texts.append(text)
        return texts

    def output(self, value) -> str:
        if isinstance(value, (Buffer, ReinterpretView)):
            return self.reference(value)
        return self.constant(value)

    def write(self) -> str:
        arguments = ", ".join(buffer.get_name() for buffer in self.plan.inputs)
        self.lines = [f"def call({arguments}):"]
        self._defined: set = set()
        position = 0
        steps = self.plan.steps
        while position < len(steps):
            step = steps[position]
            if isinstance(step, KernelPlan):
                last = self.segment_call(position)
            else:
                self.extern_call(step)
                last = position
            for index in range(position, last + 1):
                self.free(self.plan.frees.get(index, []))
            position = last + 1
        self.lines.append(f"    return [{', '.join(self._outputs())}]")
        return "\n".join(self.lines) + "\n"


def generate(plan: GraphPlan, segments: list, entries: list):
    """(wrapper source, the `call` function compiled from it)."""
    writer = WrapperWriter(plan, segments, entries)
    source = writer.write()
    namespace = dict(writer.globals)
    exec(compile(source, "<framejit wrapper>", "exec"), namespace)
    return source, namespace["call"]

