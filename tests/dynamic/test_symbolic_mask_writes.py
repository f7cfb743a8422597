"""Writes through a boolean mask over symbolic sizes compile once.

Eager checks that a mask indexing a write has the sizes of the dims it covers (`x[m] = v`:
IndexError otherwise). torch's fake `index_put_` does not ask that of the sizes, so the front
end learned nothing, and inductor's lowering of the write (`decompose._index_put_with_mask`)
compared them: a new guard, and the graph compiled once per size (29 of the program
fuzzer's 44 per-size graphs over 30 programs at stop 42). The front end now asks eager's
question (dynamo/trace/graph.py `_guard_mask_shapes`): a guard of the entry, so a call whose
mask does not fit takes another entry and raises eager's IndexError.
tests/conftest.py fails a test on any fallback, `per_size` included: these compile once.
"""
import pytest
import torch

import dynamo
import inductor
from dynamic_programs import assert_same_outcome, counting_backend, outcome


def _fill_masked(x, m):
    x[m] = -2.0
    return x * 2


def _fill_masked_columns(x, m):
    x[:, m] = torch.tensor(3.0)
    return x.sum(0)


def _index_put_mask(x, m):
    return x.index_put_((m,), torch.tensor(0.5)) + 1


def _accumulate_masked(x, m):
    return x.index_put((m,), torch.tensor(1.0), accumulate=True)


PROGRAMS = {"fill_masked": (_fill_masked, lambda n: (n, 4), lambda n: (n, 4)),
            "fill_masked_columns": (_fill_masked_columns, lambda n: (3, n), lambda n: (n,)),
            "index_put_mask": (_index_put_mask, lambda n: (n, 2), lambda n: (n, 2)),
            "accumulate_masked": (_accumulate_masked, lambda n: (n, 3), lambda n: (n,))}


def _arguments(name: str, size: int, mask_size: int, seed: int) -> tuple:
    _function, shape, mask_shape = PROGRAMS[name]
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape(size), generator=generator),
            torch.randn(mask_shape(mask_size), generator=generator) > 0)


@pytest.mark.parametrize("code_generator", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_mask_writes_compile_once_and_match_eager(name, code_generator, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", code_generator)
    function = PROGRAMS[name][0]
    dynamo.reset()
    counting = counting_backend("inductor")
    compiled = dynamo.jit(function, backend=counting, dynamic=True)
    for seed, size in enumerate([3, 5, 8, 6]):
        expected_arguments = _arguments(name, size, size, seed)
        actual_arguments = _arguments(name, size, size, seed)
        assert_same_outcome(outcome(function, expected_arguments),
                            outcome(compiled, actual_arguments), f"{name} at {size}")
        assert torch.equal(actual_arguments[0], expected_arguments[0])
        assert actual_arguments[0]._version == expected_arguments[0]._version
    assert counting.frame_count == 1


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_mask_of_other_sizes_raises_eagers_error(name):
    function = PROGRAMS[name][0]
    dynamo.reset()
    compiled = dynamo.jit(function, backend="inductor", dynamic=True)
    for seed, (size, mask_size) in enumerate([(3, 3), (5, 5), (6, 5), (4, 4)]):
        expected = outcome(function, _arguments(name, size, mask_size, seed))
        assert_same_outcome(expected, outcome(compiled, _arguments(name, size, mask_size,
                                                                   seed)),
                            f"{name} at {size}, mask {mask_size}")
        assert (expected.error is not None) == (size != mask_size)
