"""Peer finding I9 (PyTorch's test_mutable_custom_op_fixed_layout, test_fallback_mutable_op_list):
a graph calling a custom operator that writes its arguments (`Tensor(a!)`) crashed in
functionalization ("Found a custom (non-ATen) operator whose output has alias annotations")
even with the default fallback; it now runs as is, a counted fallback with its reason."""
import pytest
import torch

import dynamo


@pytest.fixture
def mylib():
    with torch.library._scoped_library("framejit_test", "DEF") as lib:
        lib.define("copy_(Tensor(a!) dst, Tensor src) -> ()")
        lib.define("sin_out(Tensor x, Tensor(a!)[] outs) -> ()")
        torch.library.impl(lib, "copy_", "Meta")(lambda dst, src: None)
        torch.library.impl(lib, "copy_", "CompositeExplicitAutograd")(
            lambda dst, src: [dst.copy_(src)] and None)
        torch.library.impl(lib, "sin_out", "Meta")(lambda x, outs: None)

        def sin_out(x, outs):
            for out in outs:
                out.copy_(x.sin())
        torch.library.impl(lib, "sin_out", "CompositeExplicitAutograd")(sin_out)
        yield torch.ops.framejit_test


def _fill_then_square(ops, x):
    full = torch.full([3], 7.0)
    ops.copy_.default(full, x)
    return full * full


def _write_list(ops, x, a, b):
    ops.sin_out.default(x + 1, [a, b])
    return a * 2 + b


@pytest.mark.expect_fallback("unsupported", reason="a custom op writing its arguments runs as is")
def test_custom_op_writing_its_argument(code_generator, mylib):
    fn = dynamo.jit(lambda x: _fill_then_square(mylib, x), backend=code_generator)
    for x in (torch.arange(3.0), torch.randn(3)):
        torch.testing.assert_close(fn(x), _fill_then_square(mylib, x))


@pytest.mark.expect_fallback("unsupported", reason="a custom op writing its arguments runs as is")
def test_custom_op_writing_a_list_of_inputs(code_generator, mylib):
    fn = dynamo.jit(lambda *args: _write_list(mylib, *args), backend=code_generator)
    x = torch.randn(4)
    a, b, a_eager, b_eager = torch.zeros(4), torch.ones(4), torch.zeros(4), torch.ones(4)
    torch.testing.assert_close(fn(x, a, b), _write_list(mylib, x, a_eager, b_eager))
    torch.testing.assert_close((a, b), (a_eager, b_eager))
