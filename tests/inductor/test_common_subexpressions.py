"""Identical ATen calls become one before lowering (inductor/lower/common_subexpressions.py),
and a body read by several consumers is computed once when costly (lower/graph.py)."""
import re

import torch
import torch.nn.functional as F

import inductor
from inductor.lower.common_subexpressions import eliminate_common_subexpressions
from tests.inductor.conftest import check_same

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


def _shuffle(x):
    b, c, h, w = x.shape
    return x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


def test_halves_of_a_split_are_realized_once_their_body_is_costly():
    """ShuffleNet's blocks: `x.chunk(2, 1)` makes two views of one body, read by two
    consumers. Realized through the views once costly, each block's kernel reads a bounded
    number of reads; unrealized, every block inlined all earlier concatenations and shuffles
    twice over (here one kernel with 512 reads; in ShuffleNet, a kernel with 36 inputs,
    0.78 ms at batch 1)."""
    def blocks(x, w):
        for _ in range(8):
            x1, x2 = x.chunk(2, dim=1)
            x = _shuffle(torch.cat((x1, torch.relu(x2 * w)), dim=1))
        return x

    compiled = check_same(blocks, torch.randn(2, 16, 5, 7), torch.randn(1, 8, 1, 1))
    kernels = compiled.report.source.split("static void")[1:]
    reads = max(len(re.findall(r"p\d+\[", text)) for text in kernels)
    assert reads <= 32, reads
