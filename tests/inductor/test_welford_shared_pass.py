"""var_mean (and layer and group norm) make two Welford reductions over the same values, the
variance's and the mean's (`welford_mean`, exact as eager's): the plan lets the second read the
first's pass (`Member.shares`), so each element is folded once, not twice. Values on both CPU
code generators (Triton under its interpreter) in every reduction shape the C++ printer has
(row lanes with a scalar tail, lanes across outer points, a row split over threads) and the
Triton one has (row in registers, looped, split: the Triton golden files show those kernels);
the C++ source declares one Welford accumulator per reduction stage."""
import re

import pytest
import torch
import torch.nn.functional as F

import inductor
from tests.inductor.conftest import compile_function


def _var_mean_last(x):
    return torch.var_mean(x, -1, keepdim=True)


def _var_mean_first(x):
    return torch.var_mean(x, 0)


def _var_mean_all(x):
    return torch.var_mean(x, correction=0)


def _layer_norm(x, weight, bias):
    return (F.layer_norm(x, x.shape[-1:], weight, bias),)


CASES = {   # name: (function, input shapes, Welford accumulators the C++ source declares)
    "row lanes and tail": (_var_mean_last, [(6, 1000 + 7)], 1),
    "short rows": (_var_mean_last, [(5, 7)], 1),
    "lanes across rows": (_var_mean_first, [(300, 256)], 1),
    "split over threads": (_var_mean_all, [(1 << 18,)], 2),   # partials and thread-locals
    "layer norm": (_layer_norm, [(64, 256), (256,), (256,)], 1),
}


def _check(function, shapes):
    """Compile `function` on seeded inputs of `shapes`; its results are eager's."""
    torch.manual_seed(0)
    inputs = [torch.randn(shape) for shape in shapes]
    compiled = compile_function(function, *inputs)
    torch.testing.assert_close(compiled(*inputs), function(*inputs), atol=1e-5, rtol=1e-5)
    return compiled


@pytest.mark.parametrize("name", list(CASES))
def test_cpp_folds_each_value_once(name, fixed_machine_settings, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", "cpp")
    function, shapes, accumulators = CASES[name]
    compiled = _check(function, shapes)
    declared = set(re.findall(r"Welford<\w+> (\w+)(?:\[\w+\])? =", compiled.report.source))
    assert len(declared) == accumulators, declared


@pytest.mark.parametrize("name", ["row lanes and tail", "short rows", "lanes across rows",
                                  "layer norm"])
def test_triton_reads_the_shared_pass(name, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", "triton")
    _check(CASES[name][0], CASES[name][1])


def test_a_mean_of_other_values_keeps_its_own_pass(monkeypatch):
    """Two Welford reductions over different values share nothing."""
    def function(x):
        variance, _mean = torch.var_mean(x, -1)
        _variance, mean = torch.var_mean(x * 2, -1)
        return variance, mean
    x = torch.randn(8, 300)
    compiled = compile_function(function, x)
    torch.testing.assert_close(compiled(x), function(x), atol=1e-5, rtol=1e-5)
