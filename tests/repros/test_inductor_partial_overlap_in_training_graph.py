"""Program fuzzer P41 (seed 61753, campaign at c7fa716): an in-place op reading memory it writes
laid out otherwise (`w.transpose(0, 1).sub_(w)`: eager's kernel refuses the partial overlap)
in a graph with an input requiring grad did not raise: inductor's training compile
functionalized the write without the checks the inference path makes on the mutating ATen
graph (`decompose.trace_aten`). The training compile now makes them too
(`decompose.refuse_inexpressible_writes`): such a graph runs eagerly and raises eager's error."""
import pytest
import torch

import dynamo


def _outcome(fn, *arguments):
    try:
        result = fn(*arguments)
    except RuntimeError as error:
        return ("RuntimeError", str(error)[:60])
    return ("ok", [value.detach().tolist() for value in result])


@pytest.mark.expect_fallback("unsupported", reason="a partial-overlap write runs as is (inference)")
@pytest.mark.parametrize("requires_grad", [True, False])
def test_partial_overlap_write_raises_as_in_eager(code_generator, requires_grad):
    def fn(x, w):
        t1 = w.transpose(0, 1)
        t1 -= w
        return x * 2, w

    def arguments():
        return (torch.ones(3, requires_grad=requires_grad), torch.arange(9.0).reshape(3, 3))
    expected = _outcome(fn, *arguments())
    assert expected[0] == "RuntimeError"
    assert _outcome(dynamo.jit(fn, backend=code_generator), *arguments()) == expected


def test_full_overlap_write_still_compiles(code_generator):
    """The same node written through itself is a full overlap, which eager computes."""
    def fn(x, w):
        w -= w * 0.5
        return x * 2, w

    def arguments():
        return (torch.ones(3, requires_grad=True), torch.arange(9.0).reshape(3, 3))
    assert _outcome(dynamo.jit(fn, backend=code_generator), *arguments()) == \
        _outcome(fn, *arguments())
