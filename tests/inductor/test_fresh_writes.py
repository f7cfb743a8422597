"""Writes into the graph's own intermediates skip the functionalizing retrace
(`inductor/fresh_writes.py`): MobileNetV3's in-place Hardswish/ReLU and residual `+=` sent the
whole decomposed graph through a second make_fx trace under `torch.func.functionalize`,
about 40% of a symbolic compile of LR-ASPP. Results against eager, static and symbolic; a
write into an input is still functionalized."""
import pytest
import torch
from torch import nn

import dynamo
from inductor.runtime import fallbacks


class Block(nn.Module):
    """conv -> in-place hardswish -> conv -> in-place relu -> residual `+=`."""

    def __init__(self):
        super().__init__()
        self.first = nn.Conv2d(4, 4, 3, padding=1)
        self.second = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = nn.functional.hardswish(self.first(x), inplace=True)
        z = torch.relu_(self.second(y))
        z += y
        return z.mul_(0.5)


@pytest.fixture
def functionalize_calls(monkeypatch):
    calls = []
    original = torch.func.functionalize

    def counted(*arguments, **keywords):
        calls.append(arguments)
        return original(*arguments, **keywords)
    monkeypatch.setattr(torch.func, "functionalize", counted)
    return calls


@pytest.mark.parametrize("dynamic", [False, True])
def test_writes_into_intermediates_are_not_functionalized_again(dynamic, functionalize_calls):
    torch.manual_seed(0)
    module = Block().eval()
    dynamo.reset()
    jitted = dynamo.jit(module, backend="inductor", dynamic=dynamic)
    before = fallbacks.fallbacks()
    with torch.no_grad():
        for shape in [(2, 4, 9, 7), (2, 4, 5, 11)]:
            x = torch.randn(shape)
            torch.testing.assert_close(jitted(x), module(x), rtol=1e-5, atol=1e-5)
    assert functionalize_calls == []        # was one per compile
    assert fallbacks.since(before) == {}


def test_write_into_an_input_is_still_functionalized(functionalize_calls):
    def function(x, y):
        t = y * 2
        t.relu_()
        x.add_(t)
        return t

    dynamo.reset()
    jitted = dynamo.jit(function, backend="inductor")
    x, y = torch.randn(5, 3), torch.randn(5, 3)
    mine, theirs = x.clone(), x.clone()
    torch.testing.assert_close(jitted(mine, y), function(theirs, y))
    torch.testing.assert_close(mine, theirs)
    assert mine._version == theirs._version
    assert len(functionalize_calls) == 1


def test_rewrite_keeps_writes_a_view_can_see():
    from inductor.fresh_writes import make_fresh_writes_functional

    def function(x):
        t = x * 2
        v = t[0]
        t.relu_()
        return v + 1

    graph = torch.fx.experimental.proxy_tensor.make_fx(function)(torch.randn(3, 2))
    assert make_fresh_writes_functional(graph) == 0
    assert any(node.target is torch.ops.aten.relu_.default for node in graph.graph.nodes)
    x = torch.randn(3, 2)
    torch.testing.assert_close(graph(x), function(x))


def test_an_in_place_view_op_is_not_made_a_view():
    """`squeeze_` on a fresh product (matmul's 1-D @ 2-D decomposition) stays a write: its
    functional form `squeeze` returns a view, and the output was then taken for a view of an
    intermediate (tests/dynamic/test_symbolic_output_views.py::
    test_the_product_of_a_vector_is_no_view went per size after c690051)."""
    from inductor.fresh_writes import make_fresh_writes_functional
    aten = torch.ops.aten

    def program(v, w):
        product = aten.mm.default(aten.unsqueeze.default(v, 0), w)
        return aten.squeeze_.dim(product, 0), aten.relu_.default(aten.mul.Tensor(w, 2))
    gm = torch.fx.experimental.proxy_tensor.make_fx(program)(torch.randn(3), torch.randn(3, 3))
    assert make_fresh_writes_functional(gm) == 1      # relu_ only
    targets = {node.target for node in gm.graph.nodes}
    assert aten.squeeze_.dim in targets and aten.squeeze.dim not in targets
    assert aten.relu.default in targets and aten.relu_.default not in targets
