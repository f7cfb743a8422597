"""Graph-fuzzer repro: reductions over one element or none, and over dim 0 of a 0-d tensor.

Before the fix, `torch.var(x)` of a 0-d or one-element tensor returned inf (eager: nan) as
the scheduler dropped the size-1 reduction loop and printed the sum of squares as the element
itself, and `x.sum(0)`, `x.amax([0])`, `torch.argmin(x, 0)` of a 0-d `x` raised `IndexError`
in the lowering (fuzzer seeds 1, 48, 127). The lowering now turns such reductions into
pointwise bodies (tests/fuzz/graphs/FINDINGS.md).
"""
import pytest
import torch

import inductor
from tests.inductor.conftest import check_same

CASES = {
    "var_mean": lambda a: torch.var_mean(a, None, keepdim=True)[0],
    "var": lambda a: a.var(),
    "var_dim0": lambda a: a.var(0),
    "std_correction0": lambda a: a.std(0, correction=0),
    "sum_dim0": lambda a: a.sum(0),
    "sum_no_dims": lambda a: a.sum([]),
    "amax_dims": lambda a: a.amax([0]),
    "argmin_dim0": lambda a: torch.argmin(a, 0),
    "argmax_keepdim": lambda a: torch.argmax(a, -1, keepdim=True),
    "prod_keepdim": lambda a: a.prod(0, keepdim=True),
    "mean_last": lambda a: a.mean(-1),
    "logsumexp": lambda a: torch.logsumexp(a, [0]),
    "any": lambda a: a.any(0),
    "all_int": lambda a: (a * 3).to(torch.int32).all(0),
}
VALUES = [0.6864, float("inf"), float("nan")]


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", [(), (1,), (3, 1)])
def test_reduction_over_one_element(cpu_backend, name, shape):
    for value in VALUES:
        x = torch.full(shape, value, dtype=torch.float64)
        if name.endswith("dim0") or name in ("amax_dims", "prod_keepdim", "any", "all_int",
                                              "logsumexp", "sum_dim0", "argmin_dim0"):
            if len(shape) == 2:
                x = x.t()  # reduce over the size-1 dim
        check_same(CASES[name], x)


@pytest.mark.parametrize("reduction", ["sum", "prod", "any", "all", "var", "mean"])
def test_reduction_over_no_elements(cpu_backend, reduction):
    x = torch.randn(3, 0, 2)
    check_same(lambda a: getattr(a, reduction)(1), x)


@pytest.mark.parametrize("case", ["amax_then_mean", "count_then_std"])
def test_reduction_over_one_element_feeding_a_reduction(cpu_backend, case):
    """Issue 21 class 6: `inductor could not compile a graph (TypeError:
    make_reduction.<locals>.inner_fn() missing 1 required positional argument: 'rindex')`.
    The one-element reduction was fused into the next reduction's kernel as a pointwise
    stage and its body called without reduction indices (fuzzer seeds 5361 and 5527 at
    68aa03b, 4 of 1,500 graphs)."""
    if case == "amax_then_mean":
        check_same(lambda a: a.amax(1, keepdim=True).mean(0), torch.randn(4, 1))
    else:
        check_same(lambda a: torch.count_nonzero(a, 1).double().std(0, correction=1),
                   torch.tensor([[11], [14], [0]], dtype=torch.uint8))
