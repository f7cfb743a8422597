"""A compiled inference graph writes its inputs in place inside its kernels, which moved no
version counter: a tensor saved for a backward outside the graph (`y = w * x`, then a jitted
`x.add_(1)`) was overwritten unseen, and `y.sum().backward()` returned a silently wrong
gradient where eager raises "one of the variables needed for gradient computation has been
modified by an inplace operation" (peer suite I2's no-grad half, reported by the itrain
helper). The wrapper now moves each written input's counter as far as eager's in-place ops
do, measured on fake copies at compile time."""
import pytest
import torch

import dynamo


def two_writes(x):
    x.add_(1)
    x.mul_(2)
    return x.sum()


def write_through_a_view(x):
    x[0] = 5.0
    x[1:].mul_(3)
    return x * 2


def write_a_view_input(v):
    v.add_(1)
    return v.sum()


def _versions_after(fn, make):
    values = make()
    fn(*values)
    return [value._version for value in values]


@pytest.mark.parametrize("fn", [two_writes, write_through_a_view])
def test_written_inputs_move_their_version_counters_as_in_eager(fn, backend):
    jitted = dynamo.jit(fn, backend=backend)
    for _ in range(3):  # compiled, then from the cache
        assert _versions_after(jitted, lambda: (torch.ones(3),)) == \
            _versions_after(fn, lambda: (torch.ones(3),))


def test_a_written_view_moves_its_base_counter(backend):
    jitted = dynamo.jit(write_a_view_input, backend=backend)
    for run in (write_a_view_input, jitted, jitted):
        base = torch.ones(4)
        run(base[1:])
        assert base._version == 1


@pytest.mark.parametrize("fn", [two_writes, write_through_a_view])
def test_a_saved_tensor_written_by_a_graph_fails_the_backward_as_in_eager(fn, backend):
    jitted = dynamo.jit(fn, backend=backend)
    for run in (fn, jitted, jitted):
        w = torch.ones(3, requires_grad=True)
        x = torch.ones(3)
        y = w * x  # saves x
        run(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()
