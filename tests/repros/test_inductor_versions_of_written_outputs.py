"""A tensor the graph makes and then writes in place (`y = x * 2; y.add_(1)`) has version 1
in eager; from the inference path of the compiled graph (no input requires grad) it came
back at 0, the kernels writing the functional result without moving a counter (the training
path's `output_bumps` already did this). Noticed while fixing P31b. Views of such a tensor
share its counter, moved once."""
import pytest
import torch

import dynamo
from tests.repros.conftest import values

PER_SIZE = ("sizes change between calls: inductor compiles one static variant per size until "
            "its kernels take sizes as arguments (issue 23, docs/inductor.md 'Symbolic sizes')")



def _written(x):
    y = x * 2
    y.add_(1)
    return y


def _written_twice_through_a_view(x):
    y = x * 2
    v = y[0:1]
    v.add_(1)
    y.mul_(3)
    return y, v


def _lone_view_of_written(x):
    y = x * 2
    y.add_(1)
    return y[1:]


def _written_under_no_grad(x):
    with torch.no_grad():
        y = x + 1
        y.sub_(1)
        y.sub_(1)
    return y, x * 2


@pytest.mark.parametrize("fn", [_written, _written_twice_through_a_view, _lone_view_of_written,
                                _written_under_no_grad])
def test_versions_of_outputs_written_in_the_graph(fn, code_generator):
    jitted = dynamo.jit(fn, backend=code_generator)
    for seed in range(2):
        x = values((3, 2), seed)
        expected, actual = fn(x), jitted(x)
        expected = expected if isinstance(expected, tuple) else (expected,)
        actual = actual if isinstance(actual, tuple) else (actual,)
        assert [(t._version, t.tolist()) for t in actual] == \
            [(t._version, t.tolist()) for t in expected]


_LINEAR = torch.nn.Linear(2, 2)


def _product_into_a_dead_buffer(w):
    return _LINEAR(w.logsumexp(-1).mul(w.logsumexp(-2)))


def test_product_written_into_a_dead_buffer_reads_version_0(code_generator):
    """Program fuzzer seed 36179 (an experimental `_version` check): the 1-D linear's `addmm`
    wrote into a dead buffer's memory with `out=`, which moves the counter: the result (a
    view of it, as eager's) read version 1 where eager's reads 0."""
    jitted = dynamo.jit(_product_into_a_dead_buffer, backend=code_generator)
    for seed in range(2):
        w = values((2, 2), seed)
        expected, actual = _product_into_a_dead_buffer(w), jitted(w)
        assert (actual._version, actual._base is not None, actual.tolist()) == \
            (expected._version, expected._base is not None, expected.tolist())
        assert actual._base._version == expected._base._version


def _kernel_output_in_a_product_s_memory(a1):
    v1 = a1.unflatten(-1, (2, 2))
    k1 = 0
    while v1.abs().sum() > 1.0137 and k1 < 3:
        v1 = v1 * 0.5
        k1 += 1

    def c1(a2):
        nonlocal a1
        a1 = a2
        return a1
    t3 = c1(a1)
    t3 = t3 + c1(torch.nn.functional.silu(torch.mm(a1, a1)))
    return torch.maximum(a1, torch.matmul(t3, a1.T))


@pytest.mark.expect_fallback("per_size", reason=PER_SIZE)
def test_kernel_output_in_a_dead_product_s_memory_reads_version_0(code_generator):
    """Program fuzzer seed 23912 (minimized): the returned `maximum` took the memory of a
    dead buffer a library product had written with `out=`, as that very object: version 1
    where eager's fresh result reads 0."""
    jitted = dynamo.jit(_kernel_output_in_a_product_s_memory, backend=code_generator)
    w = values((4, 4), 102)
    expected, actual = _kernel_output_in_a_product_s_memory(w.clone()), jitted(w.clone())
    assert (actual._version, actual._base is None) == (expected._version, expected._base is None)
    torch.testing.assert_close(actual, expected)
