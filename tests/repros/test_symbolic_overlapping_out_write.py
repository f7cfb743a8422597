"""A write into `out=` sharing elements with another argument, traced with symbolic sizes
(program fuzzer seed 60167, `--dynamic true`): the overlap check ran concrete kernels on the
views' SymInt geometry and raised an internal error ("SymIntArrayRef expected to contain only
concrete integers"). Views of symbolic geometry now count as overlapping: the write runs
eagerly, where eager raises or computes its own answer."""
import pytest
import torch

import dynamo


def multiply_into(y, w):
    z = y.sin()
    torch.mul(y.clone(), w.transpose(0, 1), out=y)
    return z + y


def _eager(y, w):
    try:
        return multiply_into(y, w), None
    except RuntimeError as error:
        return None, error


@pytest.mark.expect_fallback("per_size", reason="the graph returns a value written into an "
                             "input; inductor compiles such graphs per size (issue 23)")
@pytest.mark.parametrize("dynamic", [True, None])
def test_out_write_over_an_aliased_argument(backend, dynamic):
    jitted = dynamo.jit(multiply_into, backend=backend, dynamic=dynamic)
    for size in (4, 5, 7, 4):
        shared = torch.randn(size, size)
        for y, w in ((shared, shared), (torch.randn(size, size), torch.randn(size, size))):
            expected_y = y.clone()
            expected, error = _eager(expected_y, w.clone() if w is not y else expected_y)
            if error is not None:
                with pytest.raises(type(error), match="single memory location"):
                    jitted(y, w)
                continue
            got = jitted(y, w)
            torch.testing.assert_close(got, expected)
            torch.testing.assert_close(y, expected_y)
