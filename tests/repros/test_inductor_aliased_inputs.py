"""Inputs sharing memory, for inductor on its own (Soundness II, class 2): a graph compiled for
distinct tensors and called with one tensor twice returned the distinct case's answer (its
functional form reads `b` before writing `a`), and a graph reading the global it updates
through an argument returned the old value. `inductor.compile_fx` now checks, for graphs that
write into an input, that the inputs share storages as when it compiled them, and runs a
variant compiled for the new sharing otherwise (here without dynamo, whose guards would
recompile first)."""
import pytest
import torch
import torch.fx

import inductor


def add_then_read(a, b):
    a.mul_(3)
    return b + 1


@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing a storage runs as is")
def test_compiled_distinct_called_aliased():
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(add_then_read),
                                   [torch.ones(3), torch.ones(3)])
    a = torch.ones(3)
    result = compiled(a, a)
    assert result.tolist() == [4.0] * 3 and a.tolist() == [3.0] * 3


@pytest.mark.expect_fallback("unsupported", reason="a write into one of two inputs sharing a storage runs as is")
def test_compiled_aliased_called_distinct():
    shared = torch.ones(3)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(add_then_read), [shared, shared])
    a, b = torch.ones(3), torch.ones(3)
    assert compiled(a, b).tolist() == [2.0] * 3 and a.tolist() == [3.0] * 3


@pytest.mark.expect_fallback("unsupported", reason="a write into an input the graph also holds runs as is")
def test_argument_is_the_tensor_the_graph_holds():
    """`f(W)` where `f` does `x.mul_(3)` and returns `W + 0` for a tensor `W` the graph holds
    (a `get_attr`, read by reference)."""
    weight = torch.ones(3)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.call_method("mul_", (x, 3))
    graph.output((graph.call_function(torch.add, (graph.get_attr("weight"), 0)),))
    module = torch.fx.GraphModule({"weight": weight}, graph)
    assert module.weight is weight
    compiled = inductor.compile_fx(module, [torch.ones(3)])
    assert compiled(torch.ones(3))[0].tolist() == [1.0] * 3
    result = compiled(weight)[0]
    assert result.tolist() == weight.tolist() == [3.0] * 3
