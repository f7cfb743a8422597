"""The loop-IR printer: buffers and their loop bodies as text, for people and golden tests.

Input: a `LoopGraph` (or one buffer). Output: text such as

    buf0 = ComputedBuffer(from mul)  FixedLayout(cpu, float32, size=[4, 8], stride=[8, 1])
      Pointwise over [4, 8] at (i0, i1)
        tmp0 = load(arg0, 8*i0 + i1)
        tmp1 = constant(2.0, float32)
        tmp2 = mul(tmp0, tmp1)
        return tmp2

The body is printed by running it under a handler that names each result.
"""
from __future__ import annotations

from inductor.ir.nodes import (ComputedBuffer, ExternKernel, MultiOutput, Reduction,
                               ReinterpretView)
from inductor.ir.ops import OpsHandler, use_handler
from inductor.ir.symbols import index_symbol, signed_symbol


def _text(value) -> str:
    return str(value).replace("torch.", "")


class TextHandler(OpsHandler):
    """Names every op result `tmpN` and records `tmpN = op(arguments)`."""

    def __init__(self, indent: str = "    "):
        self.lines: list[str] = []
        self.indent = indent
        self.count = 0
        self.indirect = 0

    def _emit(self, text: str) -> str:
        name = f"tmp{self.count}"
        self.count += 1
        self.lines.append(f"{self.indent}{name} = {text}")
        return name

    def load(self, name, index):
        return self._emit(f"load({name}, {index})")

    def indirect_indexing(self, value, size, check=True):
        symbol = signed_symbol(f"t{self.indirect}")
        self.indirect += 1
        self.lines.append(f"{self.indent}{symbol} = indirect({value}, size={size})")
        return symbol

    def masked(self, mask, body, other):
        self.lines.append(f"{self.indent}masked on {mask}:")
        saved = self.indent
        self.indent = saved + "  "
        result = body()
        self.indent = saved
        return self._emit(f"where({mask}, {result}, {other})")

    def default(self, name, *args, **kwargs):
        arguments = [_text(argument) for argument in args]
        arguments += [f"{key}={_text(value)}" for key, value in kwargs.items()]
        return self._emit(f"{name}({', '.join(arguments)})")


def format_body(buffer: ComputedBuffer, indent: str = "  ") -> list[str]:
    """The lines describing a computed buffer's loop body."""
    data = buffer.data
    handler = TextHandler(indent + "  ")
    index = [index_symbol("i", position) for position in range(len(data.ranges))]
    with use_handler(handler):
        if isinstance(data, Reduction):
            rindex = [index_symbol("r", position) for position in
                      range(len(data.reduction_ranges))]
            result = data.inner_fn(index, rindex)
            variables = ", ".join(str(symbol) for symbol in index + rindex)
            header = (f"{indent}Reduction {data.reduction_type} over {data.ranges} x "
                      f"{data.reduction_ranges} at ({variables})")
        else:
            result = data.inner_fn(index)
            variables = ", ".join(str(symbol) for symbol in index)
            header = f"{indent}Pointwise over {data.ranges} at ({variables})"
    return [header] + handler.lines + [f"{indent}  return {result}"]


def format_buffer(buffer) -> str:
    """One buffer: name, kind, origin, layout and body or call."""
    origin = f"from {buffer.origin}" if buffer.origin else ""
    kind = type(buffer).__name__
    head = f"{buffer.get_name()} = {kind}({origin})  {buffer.layout}"
    if isinstance(buffer, ComputedBuffer):
        lines = [head] + format_body(buffer)
        if buffer.mutated_input:
            lines.insert(1, f"  writes into input {buffer.mutated_input}")
        return "\n".join(lines)
    if isinstance(buffer, ExternKernel):
        inputs = ", ".join(_input_name(value) for value in buffer.inputs)
        return f"{head}\n  {buffer.kind} call {buffer.op_name()}({inputs})"
    if isinstance(buffer, MultiOutput):
        return f"{head}\n  output {list(buffer.path)} of {buffer.parent.get_name()}"
    return head


def _input_name(value) -> str:
    if isinstance(value, ReinterpretView):
        return f"{value.get_name()} as {value.layout}"
    return value.get_name()


def format_graph(graph) -> str:
    """A whole `LoopGraph`: inputs, buffers, outputs."""
    lines = [f"{buffer.get_name()} = input {buffer.layout}" for buffer in graph.inputs]
    lines += [format_buffer(buffer) for buffer in graph.buffers]
    outputs = [value.get_name() if hasattr(value, "get_name") else repr(value)
               for value in graph.outputs]
    lines.append(f"return ({', '.join(outputs)})")
    return "\n".join(lines)
