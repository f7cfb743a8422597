"""`y = v @ w; y.unsqueeze_(0)` (found beside issue 23's 1-D matmul fix): eager's result is
(1, n) with strides (n, 1); inductor returned a view of the product with strides (0, 1). The
one-long dim addresses nothing, but `.stride()` shows it: an output returned as a view now
takes eager's strides on its one-long dims too (inductor/lower/graph.py `_with_strides`)."""
import pytest
import torch

import dynamo


def unsqueezed_product(v, w):
    y = v @ w
    y.unsqueeze_(0)
    return y


def squeezed_and_unsqueezed(v, w):
    y = torch.mm(v[None], w)
    y.squeeze_(0)
    y.unsqueeze_(0)
    return y


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("function", [unsqueezed_product, squeezed_and_unsqueezed])
def test_strides_of_one_long_dims_as_eager(function, dynamic, backend):
    jitted = dynamo.jit(function, backend=backend, dynamic=dynamic)
    for size in (4, 5):
        v, w = torch.randn(size), torch.randn(size, size + 1)
        expected, got = function(v, w), jitted(v, w)
        torch.testing.assert_close(got, expected)
        assert (got.shape, got.stride(), got.storage_offset(), got._base is None) == \
            (expected.shape, expected.stride(), expected.storage_offset(), True)
