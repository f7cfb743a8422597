"""An eager fallback's result layout follows its inputs' real layouts (CPU). DenseNet's
concatenations of more than `CAT_INLINE_INPUTS` features run as eager's `cat`; in a graph
switched to channels-last its inputs are channels-last, so `cat` returns channels-last, but
the buffer was declared with the FX graph's recorded NCHW strides: every call copied the
result to NCHW (`restride`, a transposing copy) and the BatchNorm after it transposed it back
(docs/performance-notes.md, DenseNet-121). Values, output strides and the wrapper's text are
checked.
"""
import re

import pytest
import torch
import torch.nn.functional as F

from tests.inductor.conftest import check_same

CAT_RESULT = re.compile(r"(buf\d+) = extern\d+\(\[")


def dense_block(layers: int):
    """A stem convolution, then `layers` layers that each convolve the concatenation of all
    the features so far (scaled: a pointwise reader of it), DenseNet-style; returns the
    last concatenation through a ReLU and as is."""
    def block(x, stem, w0, w1, w2, w3, w4, w5, w6, w7):
        features = [F.conv2d(x, stem, padding=1)]
        for weight in (w0, w1, w2, w3, w4, w5, w6, w7)[:layers]:
            features.append(torch.relu(F.conv2d(torch.cat(features, 1) * 0.5, weight,
                                                padding=1)))
        return torch.relu(torch.cat(features, 1)), torch.cat(features, 1)
    return block


def _inputs(layers=6, size=10, growth=4, stem_channels=8):
    torch.manual_seed(0)
    weights = [torch.randn(growth, stem_channels + growth * k, 3, 3) * 0.1
               for k in range(8)]
    return (torch.randn(1, 3, size, size), torch.randn(stem_channels, 3, 3, 3) * 0.3,
            *weights)


def test_fallback_cat_is_declared_with_its_inputs_layout():
    compiled = check_same(dense_block(6), *_inputs())
    source = compiled.report.source
    results = CAT_RESULT.findall(source)
    assert results, source      # more than CAT_INLINE_INPUTS inputs: eager's cat
    # The wrapper copies a library call's or fallback's result to the declared strides when
    # it comes back otherwise (`bufN = restride(bufN, size, strides)`, under a check). Before:
    # NCHW strides declared (`(2400, 100, 10, 1)`), a transposing copy every call.
    for name in results:
        declared = re.search(rf"{name} = restride\({name}, \([^)]*\), \(([^)]*)\)\)", source)
        assert declared, source
        strides = [int(stride) for stride in declared.group(1).split(",")]
        assert strides[1] == 1, declared.group(0)


@pytest.mark.parametrize("layers, size", [(5, 7), (8, 4)])
def test_outputs_match_eager_with_its_strides(layers, size):
    from tests.inductor.conftest import compile_function
    inputs = _inputs(size=size)
    compiled = compile_function(dense_block(layers), *inputs)
    expected = dense_block(layers)(*inputs)
    actual = compiled(*inputs)
    torch.testing.assert_close(actual, expected)
    for got, wanted in zip(actual, expected):
        assert got.stride() == wanted.stride()


def test_channels_last_input_matches_eager():
    inputs = list(_inputs())
    inputs[0] = inputs[0].contiguous(memory_format=torch.channels_last)
    check_same(dense_block(6), *inputs)
