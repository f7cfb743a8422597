"""Repros of the 20,000-graph CPU campaign (seeds 12440, 12769; torch 2.11 and 2.14) and of
the torch 2.11 batch (61103): layer and group norm of a row of equal values. Eager's mean
(a Welford pass, in `var_mean` and both norms) is exact there; the compiled `sum / count` was
an ulp off, and `rstd = 1 / sqrt(0 + eps)` amplified it (1.25e-4 where eager has 0). Now
`var_mean` takes the Welford pass's mean (reduction `welford_mean`). On both CPU code
generators (Triton under its interpreter), rows short (in registers) and long (looped, split
over lanes and threads)."""
import pytest
import torch
import torch.nn.functional as F

import inductor
from tests.inductor.conftest import compile_function


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _exact(function, *inputs):
    expected, actual = function(*inputs), compile_function(function, *inputs)(*inputs)
    for want, got in zip(expected, actual):
        assert torch.equal(got, want), (got - want).abs().max()


def test_layer_norm_of_an_expanded_scalar(cpu_backend):
    """Seed 12440."""
    def function(a4, a5):
        return (F.layer_norm(a4, (1, 3), a5, None, 1e-05),)
    weight = torch.tensor([[1.661873698234558, 1.5029886960983276, -0.2808413803577423]])
    _exact(function, torch.tensor([[-1.2009737491607666]]).expand(1, 3), weight)


@pytest.mark.parametrize("length", [7, 64, 1000, 70000])
def test_group_norm_and_var_mean_of_equal_values(cpu_backend, length):
    """Seeds 12769 (group_norm of an expanded (1, 1, 1)) and 61103 (-e, 0.1)."""
    if cpu_backend == "triton" and length > 1000:
        pytest.skip("slow under Triton's interpreter")

    def function(x):
        variance, mean = torch.var_mean(x, -1, keepdim=True)
        return (F.group_norm(x, 1), mean, variance)
    for value in (-1.5698573589324951, -2.7182817, 0.1, 3.0):
        _exact(function, torch.full((1, 1, 1), value).expand(2, 1, length))
        _exact(function, torch.full((2, 1, length), value))
