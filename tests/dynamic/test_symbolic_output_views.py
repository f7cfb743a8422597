"""Outputs eager allocates afresh stay fresh when a graph compiles over symbolic sizes (found
by the suite under `JIT_DYNAMIC_BY_DEFAULT=1`: tests/repros/test_inductor_fresh_outputs_not_views
.py::test_product_of_a_vector_is_no_view failed on both code generators, and by the program
fuzzer's seed 5084, `torch.matmul(x[..., -2], w)` under `--dynamic true`).

`matmul(v, w)` of a 1-D `v` is ATen's `mm(v[None], w).squeeze_(0)`, its own tensor; torch's
Python decomposition (what a trace under the Python dispatcher meets) returned
`torch.squeeze(mm, 0)`, a view, and batched products `bmm(...).view(shape)` where ATen takes
`_unsafe_view`: the jitted output was a view of a hidden (1, n) or (b, n, p) buffer
(inductor/python_dispatcher.py). Compared with eager on both backends, with `dynamic=True`
and with the default after a size change: values, shapes, strides, storage offsets, `_base`
being None as in eager, and an in-place write into the returned tensor changing nothing else.
"""
import pytest
import torch
import torch.nn.functional as F

import dynamo


def product_of_a_vector(w, d):
    d["w"] = torch.matmul(w.amin(1), w.T)
    return d["w"], d["w"][1:]


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


# name -> (function, operand shapes at size n): every product a reshape adds a dim to and
# takes it off again, and its neighbours
PRODUCTS = {
    "vector_at_matrix": (lambda v, w: v @ w, lambda n: [(n,), (n, n + 1)]),
    "matmul_of_a_slice": (lambda x, w: (x, torch.matmul(x[..., -2], w)),
                          lambda n: [(n, n), (n, n)]),
    "vector_at_transpose": (lambda v, w: torch.matmul(v, w.T), lambda n: [(n,), (n + 1, n)]),
    "matrix_at_vector": (lambda w, v: w @ v, lambda n: [(n + 1, n), (n,)]),
    "mv": (lambda w, v: torch.mv(w, v), lambda n: [(n + 1, n), (n,)]),
    "dot": (lambda a, b: a @ b, lambda n: [(n,), (n,)]),
    "batch_at_matrix": (lambda a, b: a @ b, lambda n: [(2, n, 3), (3, n)]),
    "matrix_at_batch": (lambda a, b: a @ b, lambda n: [(3, n), (2, n, 4)]),
    "vector_at_batch": (lambda a, b: a @ b, lambda n: [(n,), (2, n, 3)]),
    "batch_at_vector": (lambda a, b: a @ b, lambda n: [(2, 3, n), (n,)]),
    "batch_at_batch": (lambda a, b: a @ b, lambda n: [(2, n, 3), (2, 3, n)]),
    "broadcast_batches": (lambda a, b: a @ b, lambda n: [(n, 1, 3, 4), (5, 4, 2)]),
    "bmm": (lambda a, b: torch.bmm(a, b), lambda n: [(2, n, 3), (2, 3, n)]),
    "einsum_vector": (lambda v, w: torch.einsum("i,ij->j", v, w), lambda n: [(n,), (n, 3)]),
    "einsum_batch": (lambda a, b: torch.einsum("bij,bjk->bik", a, b),
                     lambda n: [(2, n, 3), (2, 3, n)]),
    "linear_of_a_vector": (lambda v, w: F.linear(v, w), lambda n: [(n,), (n + 1, n)]),
    "linear_of_a_vector_with_bias": (lambda v, w: F.linear(v, w, w[:, 0]),
                                     lambda n: [(n,), (n + 1, n)]),
    "tensordot": (lambda a, b: torch.tensordot(a, b, dims=([1], [0])),
                  lambda n: [(3, n), (n, 4)]),
}


def _operands(shapes, requires_grad=False):
    generator = torch.Generator().manual_seed(sum(map(sum, shapes)))
    return [(torch.randint(-8, 9, shape, generator=generator) / 4).requires_grad_(requires_grad)
            for shape in shapes]


def _outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


def _check_geometry(got, expected):
    for mine, theirs in zip(got, expected):
        torch.testing.assert_close(mine, theirs)
        assert (mine.shape, mine.stride(), mine.storage_offset()) == \
            (theirs.shape, theirs.stride(), theirs.storage_offset())
        assert (mine._base is None) == (theirs._base is None)
        assert mine.untyped_storage().nbytes() == theirs.untyped_storage().nbytes()


def _check_write(got, expected, operands, eager_operands):
    """Writing into the last output changes what it changes in eager (nothing else)."""
    got[-1].add_(1)
    expected[-1].add_(1)
    for mine, theirs in zip([*got, *operands], [*expected, *eager_operands]):
        torch.testing.assert_close(mine, theirs)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("dynamic", [True, None])
@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_are_fresh_as_in_eager(name, dynamic, backend):
    function, shapes = PRODUCTS[name]
    jitted = dynamo.jit(function, backend=backend, dynamic=dynamic)
    for size in (3, 4, 6):      # with the default, 4 recompiles over symbolic sizes
        operands = _operands(shapes(size))
        eager_operands = [value.clone() for value in operands]
        expected = _outputs(function(*eager_operands))
        got = _outputs(jitted(*operands))
        _check_geometry(got, expected)
        _check_write(got, expected, operands, eager_operands)


@pytest.mark.parametrize("name", [
    "vector_at_matrix", "batch_at_batch", "linear_of_a_vector",
    pytest.param("broadcast_batches", marks=pytest.mark.expect_fallback(
        "per_size", reason="the training graphs take a SymInt input (documented per-size "
        "class in docs/dynamic-shapes.md); the forward's aliasing is what is checked"))])
def test_products_requiring_grad_are_fresh_as_in_eager(name):
    function, shapes = PRODUCTS[name]
    jitted = dynamo.jit(function, backend="inductor", dynamic=True)
    for size in (3, 4):
        operands = _operands(shapes(size), requires_grad=True)
        eager_operands = [value.detach().clone().requires_grad_() for value in operands]
        expected = _outputs(function(*eager_operands))
        got = _outputs(jitted(*operands))
        _check_geometry(got, expected)
        assert got[-1].grad_fn is not None
        got[-1].sum().backward()
        expected[-1].sum().backward()
        for mine, theirs in zip(operands, eager_operands):
            torch.testing.assert_close(mine.grad, theirs.grad)
