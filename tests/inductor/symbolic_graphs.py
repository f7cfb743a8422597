"""Graphs with symbolic sizes as the front end hands them to a backend (issue 23's contract),
shared by tests/inductor/test_dynamic_sizes.py, test_dynamic_training.py and
test_symbolic_compile.py: placeholders' `meta["example_value"]` are fake tensors from one
ShapeEnv whose listed dims are symbolic, each with a `Source` (guards print with it)."""
import dataclasses

import torch
import torch.fx
from torch._guards import GuardSource, Source
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                   StatelessSymbolicContext)


@dataclasses.dataclass(frozen=True)
class LocalSource(Source):
    """`L['name']`: a frame local, as dynamo's sources name graph inputs."""

    text: str

    def name(self):
        return self.text

    def guard_source(self):
        return GuardSource.LOCAL


def symbolic_graph(function, inputs, dynamic, every_node: bool = True):
    """`function` traced by torch.fx with its placeholders' `example_value` fakes of `inputs`
    (dims in `dynamic[i]` of input i symbolic) from one ShapeEnv; with `every_node`, every
    node's example value too (sizes read inside the graph are SymInts), as dynamo records."""
    mode = FakeTensorMode(shape_env=ShapeEnv())
    gm = torch.fx.symbolic_trace(function)
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    for position, (node, value) in enumerate(zip(placeholders, inputs)):
        dims = dynamic[position] if position < len(dynamic) else ()
        context = StatelessSymbolicContext(dynamic_sizes=[
            DimDynamic.DYNAMIC if dim in dims else DimDynamic.STATIC
            for dim in range(value.dim())])
        node.meta["example_value"] = mode.from_tensor(
            value, source=LocalSource(f"L['{node.name}']"), symbolic_context=context)
    if every_node:
        _record_example_values(gm, mode)
    return gm


def _record_example_values(gm: torch.fx.GraphModule, mode: FakeTensorMode) -> None:
    values = {}
    with mode:
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                value = node.meta["example_value"]
            elif node.op == "get_attr":
                value = mode.from_tensor(getattr(gm, node.target))
            elif node.op in ("call_function", "call_method"):
                args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), values.get)
                value = node.target(*args, **kwargs) if node.op == "call_function" else \
                    getattr(args[0], node.target)(*args[1:], **kwargs)
            else:
                continue
            values[node] = value
            node.meta["example_value"] = value


def shape_env_of(gm: torch.fx.GraphModule):
    """The ShapeEnv behind a graph's symbolic placeholders."""
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and hasattr(value, "fake_mode"):
            return value.fake_mode.shape_env
    raise ValueError("no placeholder carries a fake tensor")
