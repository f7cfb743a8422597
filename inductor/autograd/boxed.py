"""Running an ATen graph as it is, op by op, taking its inputs as one list that it empties.

Input: an FX graph module. Output: a copy whose `forward(arguments)` takes a list, moves the
values into locals and clears the list, so that each input is freed at its last use in the
graph (FX's generated code drops every value after its last use) instead of living until the
call returns. This matters for a backward graph, whose inputs are the saved activations. The
copy carries `takes_argument_list = True`, the convention `runtime.invoke` understands.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.fx


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


def _reinplace(module: torch.fx.GraphModule) -> None:
    """torch.fx's re-inplacing pass, on the fake values the graph was traced with."""
    from torch.fx.passes.reinplace import reinplace
    placeholders = [node for node in module.graph.nodes if node.op == "placeholder"]
    fakes = [node.meta.get("val") for node in placeholders]
    if any(not isinstance(fake, torch.Tensor) for fake in fakes):
        return
    mode = fakes[0].fake_mode if fakes and hasattr(fakes[0], "fake_mode") else None
    if mode is None:
        return
    with mode:
        reinplace(module, *fakes)
