"""Program fuzzer, inductor seed 20153: `select_scatter` (the functional form of `x[:, -1] = ...`)
of an input that is a view at a storage offset returns a clone of the input's whole storage at
that offset; a graph output computed into that memory (or returned as is) came back at offset
3 of a 60-byte storage where eager's is a fresh 48-byte tensor. Library results at an offset
are now copied to the layout the kernels expect."""
import torch

import dynamo


def _layout(tensor):
    return (tuple(tensor.stride()), tensor.storage_offset(), tensor.untyped_storage().nbytes(),
            tensor._base is not None)


def _write_column_then_compute(x, w):
    x[:, -1] = x[:, 1]
    x[x > 0] = 2.0
    return torch.minimum(x * 2.0, torch.matmul(x, w))


def _clone_then_write_column(x):
    y = x.clone()
    y[:, -1] = y[:, 1]
    return y


def test_output_computed_into_a_library_result(code_generator):
    jitted = dynamo.jit(_write_column_then_compute, backend=code_generator)
    for offset in (1, 0, 2):
        x, w = torch.randn(6, 3), torch.randn(4, 3)
        x_eager, x_jit = x.clone()[offset:offset + 4], x.clone()[offset:offset + 4]
        expected = _write_column_then_compute(x_eager, w[1:])
        actual = jitted(x_jit, w[1:])
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(x_jit, x_eager)
        assert _layout(actual) == _layout(expected)


def test_returned_library_result(code_generator):
    jitted = dynamo.jit(_clone_then_write_column, backend=code_generator)
    x = torch.randn(5, 3)[1:]
    expected, actual = _clone_then_write_column(x), jitted(x)
    torch.testing.assert_close(actual, expected)
    assert _layout(actual) == _layout(expected)
