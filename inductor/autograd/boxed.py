"""Running an ATen graph as it is, op by op, taking its inputs as one list that it empties.

Input: an FX graph module. Output: a copy whose `forward(arguments)` takes a list, moves the
values into locals and clears the list, so that each input is freed at its last use in the
graph (FX's generated code drops every value after its last use) instead of living until the
call returns. This matters for a backward graph, whose inputs are the saved activations. The
copy carries `takes_argument_list = True`, the convention `runtime.invoke` understands.

Functional graphs copy where a fusing compiler would not: `index_put(zeros(...), ...)` (an
embedding's backward) copies the zeros before writing. Such scatter-like ops into a buffer that
owns its storage and has no other use are turned back into their in-place forms.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.fx

from inductor.autograd.symbols import expected_strides, stride_rule


class _ListArgumentCodeGen(torch.fx.graph.CodeGen):
    """FX code generation with a `forward(self, arguments)` header that unpacks and clears."""

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str, *args: Any,
                   **kwargs: Any) -> str:
        names = [variable.split(":")[0].split("=")[0].strip() for variable in free_vars
                 if variable.split(":")[0].strip() != "self"]
        header = f"def forward(self, arguments){maybe_return_annotation}:"
        if not names:
            return header
        return (f"{header}\n    {', '.join(names)}, = arguments\n"
                f"    arguments.clear()")


def run_graph(aten_graph: torch.fx.GraphModule, example_inputs: Sequence[Any]):
    """A `compile_inner` without code generation: the graph itself, called with a list, with
    functional ops whose input dies there turned back into in-place ops (a functional
    `index_put` on fresh zeros, as an embedding's backward makes, would otherwise copy them)."""
    graph = torch.fx.Graph()
    output = graph.graph_copy(aten_graph.graph, {})
    graph.output(output)
    module = torch.fx.GraphModule(aten_graph, graph)
    _reinplace(module)
    module.graph.set_codegen(_ListArgumentCodeGen())
    module.recompile()
    module.takes_argument_list = True
    return module


class StridedGraphRunner:
    """`run_graph`'s list-taking runner whose outputs are copied to the traced strides where
    an eager kernel returned others (what a `compile_inner` that ran a graph as is returns, but
    freeing each input at its last use). Carries the inner compiler's `report`. Symbolic
    strides (of a dense layout) are checked as the order of the dims (`symbols.stride_rule`)."""

    takes_argument_list = True

    def __init__(self, graph: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 output_strides: Sequence, report: Any = None):
        self.run = run_graph(graph, example_inputs)
        sizes = _output_sizes(graph)
        sizes += [None] * (len(output_strides) - len(sizes))
        self.strides = [stride_rule(size, stride)
                        for size, stride in zip(sizes, output_strides)]
        self.report = report

    def __call__(self, arguments: list) -> list:
        results = list(self.run(arguments))
        for position, rule in enumerate(self.strides):
            value = results[position]
            if rule is None or not isinstance(value, torch.Tensor):
                continue
            stride = expected_strides(rule, value.shape)
            if not _same_layout(value, stride):
                results[position] = torch.empty_strided(
                    value.shape, stride, dtype=value.dtype, device=value.device).copy_(value)
        return results


def _output_sizes(graph: torch.fx.GraphModule) -> list:
    """The traced sizes of each output of `graph` (None for non-tensors)."""
    output_node = next(node for node in reversed(graph.graph.nodes) if node.op == "output")
    sizes = []
    for value in output_node.args[0]:
        fake = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        sizes.append(tuple(fake.shape) if isinstance(fake, torch.Tensor) else None)
    return sizes


def _same_layout(value: torch.Tensor, stride: Sequence[int]) -> bool:
    if value.numel() == 0:
        return True
    return all(size == 1 or actual == expected
               for size, actual, expected in zip(value.shape, value.stride(), stride))


_IN_PLACE = {
    torch.ops.aten.index_put.default: torch.ops.aten.index_put_.default,
    torch.ops.aten.scatter_add.default: torch.ops.aten.scatter_add_.default,
    torch.ops.aten.index_add.default: torch.ops.aten.index_add_.default,
}


def _reinplace(module: torch.fx.GraphModule) -> None:
    """Functional scatter-like ops into a buffer that nothing else reads or views (it is
    produced by a non-view op and this is its only use) become their in-place forms."""
    for node in module.graph.nodes:
        in_place = _IN_PLACE.get(node.target) if node.op == "call_function" else None
        if in_place is None:
            continue
        base = node.args[0]
        if (isinstance(base, torch.fx.Node) and base.op == "call_function"
                and len(base.users) == 1 and _is_fresh(base)):
            node.target = in_place


def _is_fresh(node: torch.fx.Node) -> bool:
    """Whether `node`'s value owns its storage (shares it with none of its inputs)."""
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return False
    storage = value.untyped_storage()._cdata
    for argument in node.all_input_nodes:
        other = argument.meta.get("val")
        if isinstance(other, torch.Tensor) and other.untyped_storage()._cdata == storage:
            return False
    return True
