"""Tensors indexed at positions computed from sizes (issue 23): `cache[:, pos] = k` with
`pos = prefix.size(0)`, `x[:, n - 1]`, `x[..., -pos]`.

torch's tuple indexing fixed a symbolic int to its traced value (a guard `s0 == 5`), so a
decode loop over a static KV cache recompiled at every step, then ran eagerly past the
recompile limit (dynamo/variables/tensor_indexing.py now indexes through `select`). Each
program runs eagerly and jitted at several sizes on both backends: results, mutated arguments
and their version counters, exceptions (type and message) must match, with at most the
automatic-dynamic recompile (dynamic=None) or one compile (dynamic=True).
"""
import pytest
import torch

import dynamo
from dynamic_programs import assert_same_outcome, counting_backend, outcome

BACKENDS = ("eager", "inductor")


def read_column(cache, prefix):
    pos = prefix.size(0)
    return cache[:, pos] * 2, cache[pos - 1] + 1, cache[..., -pos].sum()


def read_mixed(cache, prefix):
    pos = prefix.size(0)
    return cache[None, 1, pos], cache[pos // 2, 1:], cache[:, pos:pos + 2] * cache[0, pos]


def write_column(cache, k, prefix):
    pos = prefix.size(0)
    cache[:, pos] = k                       # a tensor, broadcast along the rows
    cache[1, pos - 1] = 0.5                 # a number
    return cache.sum(1)


def write_cast(cache, k, prefix):
    pos = prefix.size(0)
    cache[..., pos] = k                     # float values into an int64 cache
    return cache * 2


PROGRAMS = {
    "read_column": (read_column, lambda n: (torch.randn(16, 16), torch.zeros(n))),
    "read_mixed": (read_mixed, lambda n: (torch.randn(16, 16), torch.zeros(n))),
    "write_column": (write_column,
                     lambda n: (torch.zeros(3, 16), torch.randn(3), torch.zeros(n))),
    "write_cast": (write_cast, lambda n: (torch.zeros(3, 16, dtype=torch.int64),
                                          torch.randn(3) * 10, torch.zeros(n))),
}


def run(function, make, sizes, backend, dynamic):
    dynamo.reset()
    counting = counting_backend(backend)
    jitted = dynamo.jit(function, backend=counting, dynamic=dynamic)
    for call, n in enumerate(sizes):
        expected_arguments = make(n)
        arguments = tuple(value.detach().clone().requires_grad_(value.requires_grad)
                          for value in expected_arguments)     # leaves stay leaves
        expected = outcome(function, expected_arguments)
        actual = outcome(jitted, arguments)
        assert_same_outcome(expected, actual, f"call {call} (n={n})")
        if expected.error is not None:
            assert str(actual.error) == str(expected.error)
        for mine, theirs in zip(arguments, expected_arguments):
            assert mine._version == theirs._version, f"call {call}: version counter"
    return counting.frame_count


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_positions_from_sizes_compile_once(name, backend):
    function, make = PROGRAMS[name]
    sizes = [3, 4, 5, 9, 13, 7, 4]
    assert run(function, make, sizes, backend, None) == 2      # the first size, then all
    assert run(function, make, sizes, backend, True) == 1


@pytest.mark.expect_fallback(
    "per_size", reason="the raising store breaks the graph; its resume function takes `pos` as "
    "an int argument, which automatic dynamic makes a SymInt graph input: per size (issue 23)")
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_position_out_of_range_raises_eagers_error(backend):
    """16 is past the cache: eager's IndexError and message (the trace at that size takes
    torch's own indexing); the sizes before and after still match."""
    function, make = PROGRAMS["write_column"]
    run(function, make, [3, 5, 16, 6, 17], backend, None)
    function, make = PROGRAMS["read_column"]
    run(function, make, [3, 5, 16, 6], backend, True)


def test_a_write_into_a_leaf_requiring_grad_raises_as_eager():
    def write(weight, prefix):
        weight[:, prefix.size(0)] = 1.0
        return weight

    run(write, lambda n: (torch.randn(3, 16, requires_grad=True), torch.zeros(n)), [3, 5],
        "eager", True)
