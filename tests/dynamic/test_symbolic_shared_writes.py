"""A graph with symbolic sizes writing into inputs that share memory runs as is, once.

Functionalizing writes into two inputs that are views of one tensor would treat them as
independent, so such a call runs the captured torch-level graph as is (eager's kernels), as
the static path does for its one size. The symbolic path used to refuse it as `NotSymbolic`,
which compiled one static variant per size, each of which then ran as is anyway: a static
trace per size and up to `size_variant_limit` variants (11 of the program fuzzer's 14
per-size graphs over 30 programs at stop 42). Now it runs as is for every size, keyed by the
sharing of storages: a call whose inputs do not share memory gets its own (symbolic) compile.
"""
import pytest
import torch

import dynamo
import inductor
from dynamic_programs import assert_same_outcome, counting_backend, outcome
from inductor.runtime import fallbacks


def write_both(x, y):
    x.add_(1)
    y.mul_(2)
    return x + y, x.sum(0)


def _pair(size: int, seed: int, shared: bool) -> tuple:
    """Two (size, 3) tensors: rows of one base (sharing memory), or separate ones."""
    generator = torch.Generator().manual_seed(seed)
    if shared:
        base = torch.randn(2, size, 3, generator=generator)
        return base[0], base[1]
    return torch.randn(size, 3, generator=generator), torch.randn(size, 3, generator=generator)


def _copies(arguments: tuple) -> tuple:
    x, y = arguments
    if x._base is not None and x._base is y._base:
        base = x._base.clone()
        return base[0], base[1]
    return x.clone(), y.clone()


@pytest.mark.expect_fallback("unsupported", reason="the shared-storage calls run as is")
@pytest.mark.parametrize("code_generator", ["cpp", "triton"])
def test_shared_writes_run_as_is_for_every_size(code_generator, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", code_generator)
    dynamo.reset()
    counting = counting_backend("inductor")
    compiled = dynamo.jit(write_both, backend=counting, dynamic=True)
    before = fallbacks.fallbacks()
    for seed, (size, shared) in enumerate([(3, True), (5, True), (8, True), (6, False),
                                           (9, False), (7, True)]):
        arguments = _pair(size, seed, shared)
        expected_arguments = _copies(arguments)
        expected = outcome(write_both, expected_arguments)
        assert_same_outcome(expected, outcome(compiled, arguments), f"{size}, {shared}")
        for got, want in zip(arguments, expected_arguments):
            assert got._version == want._version, (size, shared)
    counts = fallbacks.since(before)
    assert not any(reason.startswith("per_size") for reason in counts), counts
    assert sum(counts.values()) == 1, counts    # the as-is run, once for every size
    assert counting.frame_count == 2    # the front end guards the sharing: an entry each
