"""Identical ATen calls become one before lowering (inductor/lower/common_subexpressions.py)."""
import torch
import torch.nn.functional as F

import inductor
from inductor.lower.common_subexpressions import eliminate_common_subexpressions

aten = torch.ops.aten


def _aten_graph(function, *inputs):
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(function)(*inputs)


def _calls(gm, target) -> int:
    return sum(1 for node in gm.graph.nodes if node.target is target)


def test_repeated_copies_of_one_value_become_one():
    def function(x, bias):
        mask = bias + x.sum()
        return [torch.mm(x, (mask * 2).contiguous()) for _ in range(3)]

    x, bias = torch.randn(4, 4), torch.randn(4, 4)
    gm = _aten_graph(function, x, bias)
    assert _calls(gm, aten.mul.Tensor) == 3
    assert eliminate_common_subexpressions(gm) == 2     # the second and third `mask * 2`
    # the products are returned: three outputs stay three tensors
    assert _calls(gm, aten.mul.Tensor) == 1 and _calls(gm, aten.mm.default) == 3
    for actual, expected in zip(gm(x, bias), function(x, bias)):
        torch.testing.assert_close(actual, expected)


def test_random_ops_and_returned_values_are_kept():
    def function(x):
        noise = torch.rand_like(x) + torch.rand_like(x)
        return x.clone(), x.clone(), x.clone().t(), noise

    x = torch.randn(3, 3)
    gm = _aten_graph(function, x)
    assert eliminate_common_subexpressions(gm) == 0
    first, second, third, noise = gm(x)
    assert first.data_ptr() != second.data_ptr() != third.data_ptr()
    assert _calls(gm, aten.rand_like.default) == 2


def test_shared_attention_mask_is_computed_once():
    """Each layer rebuilds the same mask (as T5's layers do): one buffer, not three."""
    def function(q, k, v, mask, bias):
        out = q
        for _ in range(3):
            expanded = (bias + mask).expand(2, 4, 8, 8) * 0.5
            out = F.scaled_dot_product_attention(out, k, v, attn_mask=expanded)
        return out

    inputs = [torch.randn(2, 4, 8, 16) for _ in range(3)] + [torch.randn(2, 1, 1, 8),
                                                          torch.randn(1, 4, 8, 8)]
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), inputs)
    torch.testing.assert_close(compiled(*inputs), function(*inputs))
    assert compiled.report.source.count("empty_strided(") == 1
