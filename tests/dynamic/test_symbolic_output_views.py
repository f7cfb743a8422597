"""Outputs eager allocates afresh stay fresh when a graph compiles over symbolic sizes (found
by the suite under `JIT_DYNAMIC_BY_DEFAULT=1`: tests/repros/test_inductor_fresh_outputs_not_views
.py::test_product_of_a_vector_is_no_view fails on both code generators). Runs with
`dynamic=True`, inductor (C++), compared with eager: values, strides and `_base`.

Open (strict xfail): `matmul(v, w.T)` of a 1-D `v` is ATen's `mm(v[None], w.T).squeeze_(0)`,
its own tensor; torch's Python decomposition (what the torch-level fake run in
`inductor/decompose_symbolic._traced` meets under the Python dispatcher) returns
`torch.squeeze(mm, 0)`, a view, so `aliasing.observable_outputs` takes eager's output for a
view of the (1, n) product and the wrapper returns `as_strided` of it.
"""
import pytest
import torch

import dynamo


def product_of_a_vector(w, d):
    d["w"] = torch.matmul(w.amin(1), w.T)
    return d["w"], d["w"][1:]


@pytest.mark.xfail(strict=True, reason="the Python matmul decomposition's squeeze is a view "
                   "(inductor/decompose_symbolic._traced's torch-level run): as_strided of "
                   "the (1, n) product is returned")
@pytest.mark.parametrize("size", [3, 5])
def test_the_product_of_a_vector_is_no_view(size):
    w = torch.arange(float(size * size)).reshape(size, size) / 4
    expected = product_of_a_vector(w, {})
    d: dict = {}
    got = dynamo.jit(product_of_a_vector, backend="inductor", dynamic=True)(w, d)
    torch.testing.assert_close(got, expected)
    assert [value.stride() for value in got] == [value.stride() for value in expected]
    assert d["w"] is got[0]
    assert expected[0]._base is None and got[0]._base is None
    assert got[1]._base is got[0]
