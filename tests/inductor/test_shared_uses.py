"""A value whose several users all lead into one elementwise op is inlined there, not realized
(`inductor/lower/shared_uses.py`). Bilinear interpolation is `top + (bottom - top) * weight`
after decomposition; `top` (four gathered loads) was realized on reuse, so LRASPP's final
upsample wrote a 1x21x224x224 buffer channels-last and read it back transposed
(docs/performance-notes.md, LRASPP). Values are compared with eager on both code generators;
the structure is read from the loop IR.
"""
import re

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from inductor import debug_artifacts
from inductor.lower.shared_uses import uses_meet
from tests.inductor.conftest import check_same


def _aten_graph(function, *inputs):
    return make_fx(function)(*inputs)


def _node(graph, name):
    return next(node for node in graph.graph.nodes if node.name == name)


def test_uses_that_meet_in_one_op():
    def lerp_by_hand(x, y, w):
        top = x * y
        return top + (w - top) * 0.5
    graph = _aten_graph(lerp_by_hand, *(torch.randn(4, 5) for _ in range(3)))
    assert uses_meet(_node(graph, "mul"))


@pytest.mark.parametrize("case", ["two outputs", "transposed", "reduction", "broadcast"])
def test_uses_that_do_not_meet(case):
    def function(x, y):
        top = x * y
        if case == "two outputs":
            return top + 1, top - 1
        if case == "transposed":
            return top + top.t()
        if case == "reduction":
            return top + top.sum()
        return (top - 1).unsqueeze(0) + torch.randn(3, 5, 5) * top    # (5, 5) -> (3, 5, 5)
    graph = _aten_graph(function, torch.randn(5, 5), torch.randn(5, 5))
    assert not uses_meet(_node(graph, "mul"))


def _upsample_of_sum(a, b):
    return F.interpolate(a + b, size=(40, 36), mode="bilinear", align_corners=False)


def _computed_sizes(function, *inputs):
    """The sizes of the ComputedBuffers of `function`'s loop IR, and its compiled form."""
    texts = []

    def listen(name, value):
        if name == "loop_ir":
            texts.append(value)
    debug_artifacts.add_listener(listen)
    try:
        compiled = check_same(function, *inputs)
    finally:
        debug_artifacts.remove_listener(listen)
    sizes = re.findall(r"ComputedBuffer\(.*size=\[([0-9, ]+)\]", "\n".join(texts))
    return sizes, compiled


@pytest.mark.parametrize("channels_last", [False, True])
def test_bilinear_upsample_writes_only_its_result(channels_last):
    """Without the rule `top` was a second buffer of the result's size (loop IR)."""
    a, b = torch.randn(1, 5, 10, 9), torch.randn(1, 5, 10, 9)
    if channels_last:
        a, b = (t.to(memory_format=torch.channels_last) for t in (a, b))
    sizes, _ = _computed_sizes(_upsample_of_sum, a, b)
    assert sizes.count("1, 5, 40, 36") == 1, sizes


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("scale", [None, 2.5])
def test_bilinear_upsample_values(code_generator, align_corners, scale):
    def upsample(a, b):
        options = {"scale_factor": scale} if scale else {"size": (13, 7)}
        return F.interpolate(a * b + 1, mode="bilinear", align_corners=align_corners,
                             **options)
    torch.manual_seed(0)
    check_same(upsample, torch.randn(2, 3, 6, 5), torch.randn(2, 3, 6, 5))


def test_meeting_uses_of_a_transcendental_body_stay_realized():
    """The rule skips bodies calling exp, cos, ...: those are realized once, as before."""
    def function(a, b, c, d, e):
        top = (a * b + c * d + e).exp()
        return top + (a - top) * 0.5
    inputs = [torch.randn(16, 16) for _ in range(5)]
    sizes, _ = _computed_sizes(function, *inputs)
    assert sizes.count("16, 16") == 2, sizes
