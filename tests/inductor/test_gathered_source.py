"""A computed source gathered from many times its size is realized first on CPUs
(`GATHERED_SOURCE_RATIO`, `inductor/lower/indexing.py`): inlined, each gathered read repeated
every load of its body at a scattered address. LRASPP's final upsample gathered the sum of
two convolutions with 8 scattered loads per output element instead of 4
(docs/performance-notes.md, LRASPP). Values against eager; structure from the loop IR.
"""
import re

import pytest
import torch
import torch.nn.functional as F

from inductor import debug_artifacts
from tests.inductor.conftest import check_same


def _computed_sizes(function, *inputs):
    texts = []

    def listen(name, value):
        if name == "loop_ir":
            texts.append(value)
    debug_artifacts.add_listener(listen)
    try:
        check_same(function, *inputs)
    finally:
        debug_artifacts.remove_listener(listen)
    return re.findall(r"ComputedBuffer\(.*size=\[([0-9, ]+)\]", "\n".join(texts))


def _upsample_of_sum(a, b):
    return F.interpolate(a + b, size=(40, 36), mode="bilinear", align_corners=False)


@pytest.mark.parametrize("channels_last", [False, True])
def test_upsampled_sum_is_computed_once(channels_last):
    """The sum (2 loads per element) is a buffer of its own; inlined without the rule."""
    a, b = torch.randn(1, 5, 10, 9), torch.randn(1, 5, 10, 9)
    if channels_last:
        a, b = (t.to(memory_format=torch.channels_last) for t in (a, b))
    sizes = _computed_sizes(_upsample_of_sum, a, b)
    assert sizes.count("1, 5, 10, 9") == 1, sizes


def test_gather_of_its_own_size_stays_inlined():
    """Read once per element on average: the sum is recomputed in the gather."""
    def function(a, b, index):
        return (a + b)[index]
    sizes = _computed_sizes(function, torch.randn(64), torch.randn(64),
                            torch.randint(0, 64, (64,)))
    assert sizes == ["64"], sizes


def test_many_times_gathered_sum_values(code_generator):
    def function(a, b, rows, columns):
        return (a * b - 1)[rows[:, None], columns]
    torch.manual_seed(0)
    check_same(function, torch.randn(6, 5), torch.randn(6, 5),
               torch.randint(-6, 6, (30,)), torch.randint(0, 5, (7,)))
